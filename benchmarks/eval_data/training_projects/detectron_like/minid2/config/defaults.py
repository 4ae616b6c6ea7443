from types import SimpleNamespace

_C = SimpleNamespace()
_C.MODEL = SimpleNamespace(DEVICE="cuda", NUM_CLASSES=80)
_C.SOLVER = SimpleNamespace(BASE_LR=0.02, MAX_ITER=90000, IMS_PER_BATCH=16, CHECKPOINT_PERIOD=5000)
_C.DATALOADER = SimpleNamespace(NUM_WORKERS=4, ASPECT_RATIO_GROUPING=True)
_C.CUDNN_BENCHMARK = False
_C.OUTPUT_DIR = "./output"


def get_cfg():
    import copy
    return copy.deepcopy(_C)
