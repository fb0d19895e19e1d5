"""Class-per-folder images, read into one float array in the 8-bit range.

Every image comes out as ``float32`` in [0, 255] with ``channels`` channels,
whatever its bit depth and mode: 16-bit and 32-bit integers are scaled (not
clipped), float images are taken as [0, 1] when they fit there, transparency
is applied (a transparent pixel is black, whatever colour the file stores
under it), palettes and CMYK are converted. Plain 8-bit ``L``/``RGB`` images
take PIL's own path, as before.

Files that cannot be used are skipped and counted by reason in one line:
unreadable (not an image, truncated), too large (more pixels than
:data:`MAX_IMAGE_PIXELS`, decompression bombs included), not images (by
suffix). File names are shown so that any byte sequence can be logged.
"""
from __future__ import annotations

import logging
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

from ablation.data.formats import DataError, one_line

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm")
# PIL's own decompression-bomb threshold (about 89 M pixels: 250 MB as RGB).
MAX_IMAGE_PIXELS = 89_478_485
# Luma weights (ITU-R 601-2), as PIL's RGB -> L.
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def shown(path) -> str:
    """A path as text any log or terminal can take: bytes that are not UTF-8
    (kept by Python as surrogates) are written as ``\\xNN``."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def class_folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


class TooLarge(Exception):
    """An image with more pixels than :data:`MAX_IMAGE_PIXELS`."""


def pixels(image) -> np.ndarray:
    """(h, w, 1 or 3) float32 in [0, 255] from a PIL image of any mode."""
    mode = image.mode
    if mode.startswith("I"):  # I;16 (16-bit PNG), I;16B, I (32-bit ints, 16-bit data)
        array = np.asarray(image, dtype=np.float64)
        return (np.clip(array / 65535.0, 0.0, 1.0) * 255.0).astype(np.float32)[..., None]
    if mode == "F":
        array = np.nan_to_num(np.asarray(image, dtype=np.float64), nan=0.0, posinf=0.0,
                              neginf=0.0)
        scale = 255.0 if array.size and array.min() >= 0.0 and array.max() <= 1.0 else 1.0
        return np.clip(array * scale, 0.0, 255.0).astype(np.float32)[..., None]
    if "A" in mode or "a" in mode or "transparency" in image.info:
        rgba = np.asarray(image.convert("RGBA"), dtype=np.float32)
        return rgba[..., :3] * (rgba[..., 3:] / 255.0)
    if mode in ("1", "L"):
        return np.asarray(image.convert("L"), dtype=np.float32)[..., None]
    return np.asarray(image.convert("RGB"), dtype=np.float32)


def _resize(array: np.ndarray, size: int) -> np.ndarray:
    from PIL import Image

    return np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(array[..., c]), mode="F")
                                .resize((size, size), Image.BILINEAR), dtype=np.float32)
                     for c in range(array.shape[-1])], axis=-1)


def _channels(array: np.ndarray, channels: int) -> np.ndarray:
    if array.shape[-1] == channels:
        return array
    if channels == 1:
        return (array @ _LUMA)[..., None].astype(np.float32)
    return np.repeat(array, channels, axis=-1)


def read_image(file: Path, size: int, channels: int) -> np.ndarray:
    """One image as (size, size, channels) float32 in [0, 255]."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(file)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
            raise TooLarge(str(e)) from None
    with image:
        width, height = image.size
        if width * height > MAX_IMAGE_PIXELS:
            raise TooLarge(f"{width}x{height} pixels")
        if image.mode in ("L", "RGB") and channels in (1, 3):  # 8-bit: PIL's own path
            image = image.convert("L" if channels == 1 else "RGB")
            image = image.resize((size, size), Image.BILINEAR)
            return np.asarray(image, dtype=np.float32).reshape(size, size, channels)
        image.load()
        return _channels(_resize(pixels(image), size), channels)


def read_image_tree(root: Path, classes: list[str], size: int, channels: int,
                    minimum: int = 1):
    """Images and labels of ``root/<class>/*``; a class with fewer than
    ``minimum`` usable images is refused in one line naming it."""
    from PIL import UnidentifiedImageError

    images, labels = [], []
    skipped = Counter()      # reason -> files
    examples: dict[str, list[str]] = {}
    not_images = Counter()   # suffix -> files skipped for not being images
    for label, name in enumerate(classes):
        folder = root / name
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith(".")) \
            if folder.is_dir() else []
        files = [p for p in entries if p.suffix.lower() in IMAGE_SUFFIXES]
        not_images.update(p.suffix.lower() or "(no suffix)" for p in entries
                          if p.is_file() and p.suffix.lower() not in IMAGE_SUFFIXES)
        count = 0
        for file in files:
            try:
                images.append(read_image(file, size, channels))
            except TooLarge:
                reason = f"too large (over {MAX_IMAGE_PIXELS:,} pixels)"
            except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as e:
                reason = "unreadable"
                log.debug("unreadable image %s: %s", shown(file), one_line(e))
            else:
                labels.append(label)
                count += 1
                continue
            skipped[reason] += 1
            examples.setdefault(reason, []).append(shown(file.relative_to(root)))
        if folder.is_dir() and count == 0:
            raise DataError(f"class folder {shown(folder)} has no readable images "
                            f"({', '.join(IMAGE_SUFFIXES)})")
        if folder.is_dir() and count < minimum:
            raise DataError(
                f"class {shown(name)!r} in {shown(root)} has {count} usable image(s): each class "
                f"needs at least {minimum} (to train and to test on); add images or remove "
                f"the folder")
    _log_skipped(root, skipped, examples, not_images)
    return np.stack(images), np.asarray(labels, dtype=np.int64)


def _log_skipped(root: Path, skipped: Counter, examples: dict, not_images: Counter) -> None:
    """One line: every file left out of ``root``'s class folders, by reason."""
    parts = [f"{n} {reason} (e.g. {', '.join(examples[reason][:3])})"
             for reason, n in sorted(skipped.items())]
    if not_images:
        kinds = ", ".join(f"{n} {suffix}" for suffix, n in sorted(not_images.items()))
        parts.append(f"{sum(not_images.values())} not images ({kinds}; only "
                     f"{' '.join(IMAGE_SUFFIXES)} are read)")
    if parts:
        log.warning("skipped %d file(s) in the class folders of %s: %s",
                    sum(skipped.values()) + sum(not_images.values()), shown(root),
                    "; ".join(parts))
