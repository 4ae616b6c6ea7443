from types import SimpleNamespace


def get_config(args):
    cfg = SimpleNamespace()
    cfg.DATA = SimpleNamespace(BATCH_SIZE=128, DATA_PATH=args.data_path, IMG_SIZE=224, NUM_WORKERS=8,
                               PIN_MEMORY=True)
    cfg.MODEL = SimpleNamespace(TYPE="swin", NUM_CLASSES=1000, DROP_PATH_RATE=0.1)
    cfg.TRAIN = SimpleNamespace(EPOCHS=300, BASE_LR=5e-4, CLIP_GRAD=5.0, ACCUMULATION_STEPS=1)
    cfg.AMP_ENABLE = True
    cfg.PRINT_FREQ = 10
    cfg.OUTPUT = "output"
    return cfg
