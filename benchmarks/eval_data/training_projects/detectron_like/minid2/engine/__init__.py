from .defaults import default_argument_parser, default_setup
from .hooks import IterationTimer, PeriodicCheckpointer, PeriodicWriter
from .train_loop import HookBase, SimpleTrainer, TrainerBase
