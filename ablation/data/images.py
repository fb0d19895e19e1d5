"""Class-per-folder images, read into one float array in the 8-bit range.

Every image comes out as ``float32`` in [0, 255] with ``channels`` channels,
whatever its bit depth and mode (wide integers scaled, floats in [0, 1]
stretched, transparency applied as black, palettes and CMYK converted).
Files that cannot be used are skipped and counted by reason in one line
(unreadable, too large, not regular files: never opened, links to nothing,
not images). What is read is listed once (:func:`class_files`, links
followed): the loader decodes those files and the data fingerprint hashes
the same ones (:func:`image_folder_files`).
"""
from __future__ import annotations

import logging
import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ablation import files
from ablation.data import raw_files
from ablation.files import shown
from ablation.data.formats import DataError, one_line

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm")
# PIL's own decompression-bomb threshold (about 89 M pixels: 250 MB as RGB).
MAX_IMAGE_PIXELS = 89_478_485
# The largest image file opened (an uncompressed image of MAX_IMAGE_PIXELS fits).
MAX_IMAGE_BYTES = 512 << 20
NOT_REGULAR = "not regular files (FIFOs, sockets or devices: never opened)"
NO_TARGET = "links to nothing"
TOO_BIG_FILE = f"too large (files over {MAX_IMAGE_BYTES >> 20} MiB)"
# Luma weights (ITU-R 601-2), as PIL's RGB -> L.
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _entries(folder: Path) -> list[Path]:
    try:
        return files.entries(folder, hidden=False, follow_links=True)
    except OSError as e:
        raise DataError(f"{shown(folder)} cannot be listed ({one_line(e)})") from None


@dataclass
class ClassFiles:
    """One class folder's listing: what is opened, what is left out and why."""
    images: list[Path] = field(default_factory=list)  # opened and decoded, in this order
    skipped: list[tuple[str, Path]] = field(default_factory=list)  # (reason, file): not opened
    not_images: Counter = field(default_factory=Counter)  # suffix -> regular non-image files


def class_files(folder: Path) -> ClassFiles:
    """The one listing of a class folder, for the loader and the fingerprint alike.

    Hidden names and nested folders are not read; regular files (links
    followed) with an image suffix and at most :data:`MAX_IMAGE_BYTES` are;
    FIFOs, sockets, devices and links to nothing are skipped by reason without
    being opened."""
    listing = ClassFiles()
    if raw_files.kind(folder) != "folder":
        return listing
    for entry in _entries(folder):
        what = raw_files.kind(entry)
        if what == "folder":
            continue
        if what == "special":
            listing.skipped.append((NOT_REGULAR, entry))
        elif what == "missing":
            listing.skipped.append((NO_TARGET, entry))
        elif entry.suffix.lower() not in IMAGE_SUFFIXES:
            listing.not_images[entry.suffix.lower() or "(no suffix)"] += 1
        else:
            try:
                too_big = os.stat(entry).st_size > MAX_IMAGE_BYTES   # links followed
            except OSError:  # gone since the listing
                listing.skipped.append((NO_TARGET, entry))
                continue
            if too_big:
                listing.skipped.append((TOO_BIG_FILE, entry))
            else:
                listing.images.append(entry)
    return listing


def image_folder_layout(root: Path) -> tuple[Path, Path | None, list[str]]:
    """(train root, test root or None, class folder names) of an image folder:
    ``root/train`` and ``root/test`` (or ``val``) when there, else ``root``."""
    train_root = root / "train" if raw_files.kind(root / "train") == "folder" else root
    test_root = next((root / s for s in ("test", "val") if raw_files.kind(root / s) == "folder"),
                     None)
    folders = [p.name for p in _entries(train_root)  # links to folders included
               if raw_files.kind(p) == "folder" and p.name not in ("train", "test", "val")]
    return train_root, test_root, folders


def image_folder_files(root: Path) -> list[Path]:
    """Every file the image-folder loader opens under ``root``, by the same walk."""
    train_root, test_root, folders = image_folder_layout(root)
    return [file for split in (train_root, test_root) if split is not None
            for name in folders for file in class_files(split / name).images]


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

    with files.open_file(file, MAX_IMAGE_BYTES, follow_links=True) as f:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            try:
                image = Image.open(f)
            except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
                raise TooLarge(str(e)) from None
        with image:
            return _decoded(image, size, channels)


def _decoded(image, size: int, channels: int) -> np.ndarray:
    """The image upright (its EXIF orientation applied, as a viewer shows it), resized."""
    from PIL import Image, ImageOps

    width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        raise TooLarge(f"{width}x{height} pixels")
    image = ImageOps.exif_transpose(image)
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
    skipped: list[tuple[str, Path]] = []   # (reason, file) for every file left out
    not_images = Counter()   # suffix -> files skipped for not being images
    for label, name in enumerate(classes):
        folder = root / name
        listing = class_files(folder)
        not_images.update(listing.not_images)
        skipped += listing.skipped
        count = 0
        for file in listing.images:
            try:
                images.append(read_image(file, size, channels))
            except TooLarge:
                skipped.append((f"too large (over {MAX_IMAGE_PIXELS:,} pixels)", file))
            except files.NotAFile:  # it changed since the listing
                skipped.append((NOT_REGULAR, file))
            except files.TooBig:
                skipped.append((TOO_BIG_FILE, file))
            except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as e:
                skipped.append(("unreadable", file))
                log.debug("unreadable image %s: %s", shown(file), one_line(e))
            else:
                labels.append(label)
                count += 1
        is_folder = raw_files.kind(folder) == "folder"
        if is_folder and count == 0:
            raise DataError(f"class folder {shown(folder)} has no readable images "
                            f"({', '.join(IMAGE_SUFFIXES)})")
        if is_folder and count < minimum:
            raise DataError(
                f"class {shown(name)!r} in {shown(root)} has {count} usable image(s): each class "
                f"needs at least {minimum} (to train and to test on); add images or remove "
                f"the folder")
    _log_skipped(root, skipped, not_images)
    return np.stack(images), np.asarray(labels, dtype=np.int64)


def _log_skipped(root: Path, skipped: list[tuple[str, Path]], not_images: Counter) -> None:
    """One line: every file left out of ``root``'s class folders, by reason."""
    parts = [f"{n} {reason} (e.g. "
             f"{', '.join([shown(f.relative_to(root)) for r, f in skipped if r == reason][:3])})"
             for reason, n in sorted(Counter(reason for reason, _ in skipped).items())]
    if not_images:
        kinds = ", ".join(f"{n} {suffix}" for suffix, n in sorted(not_images.items()))
        parts.append(f"{sum(not_images.values())} not images ({kinds}; only "
                     f"{' '.join(IMAGE_SUFFIXES)} are read)")
    if parts:
        log.warning("skipped %d file(s) in the class folders of %s: %s",
                    len(skipped) + sum(not_images.values()), shown(root),
                    "; ".join(parts))
