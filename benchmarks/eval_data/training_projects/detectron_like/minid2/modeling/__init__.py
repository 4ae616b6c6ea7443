from .meta_arch import build_model
