from .modeling import *
