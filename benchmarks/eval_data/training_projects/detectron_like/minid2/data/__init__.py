from .build import build_detection_train_loader
