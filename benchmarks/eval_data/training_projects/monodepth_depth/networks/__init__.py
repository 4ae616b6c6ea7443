from .resnet_encoder import ResnetEncoder
from .depth_decoder import DepthDecoder
