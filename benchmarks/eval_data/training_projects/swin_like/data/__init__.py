from .build import build_loader
