from .model import NeRF
from .render import get_rays, render

__all__ = ["NeRF", "get_rays", "render"]
