import numpy as np
from PIL import Image


def read_gen(file_name):
    if file_name.endswith(".flo"):
        with open(file_name, "rb") as f:
            np.fromfile(f, np.float32, count=1)
            w, h = np.fromfile(f, np.int32, count=2)
            return np.fromfile(f, np.float32, count=2 * int(w) * int(h)).reshape(int(h), int(w), 2)
    return Image.open(file_name)
