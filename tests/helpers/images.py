"""Image folders made of real PNG files, for the data loaders' tests."""
import numpy as np
from PIL import Image


def image_folder(root, classes=("a", "b"), count=3, seed=0):
    """``count`` random 8x8 RGB PNGs per class folder under ``root``; ``root``."""
    rng = np.random.default_rng(seed)
    for name in classes:
        (root / name).mkdir(parents=True)
        for i in range(count):
            Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(
                root / name / f"{i}.png")
    return root
