"""Datasets as numpy arrays in memory, split into train / validation / test.

Small datasets fit in memory, and plain numpy keeps the input pipeline
backend-neutral: augmentation runs inside the model (see
:func:`ablation.model.build_augmentation`). Every loader reads the real files;
network downloads go through ``keras.datasets`` and fail with one line that
names the offline alternatives.
"""
from __future__ import annotations

import gzip
import logging
import pickle
import tarfile
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm")


class DataError(RuntimeError):
    """A dataset that cannot be loaded; the message (one line) says how to fix it."""


def one_line(error: BaseException, limit: int = 160) -> str:
    """``Type: message`` on one line, shortened at a word boundary if long.

    Library errors can span lines (``tarfile`` lists every method it tried)
    or run on (a URL and a socket error); a refusal must stay one line that
    still ends in what to do.
    """
    text = " ".join(f"{type(error).__name__}: {error}".split())
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0] + " ..."
    return text


@dataclass
class Dataset:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: list[str]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return tuple(self.x_train.shape[1:])


# --- the real file formats -------------------------------------------------

def _cifar_members(archive: Path, folder: str) -> Callable[[str], dict]:
    """A reader of the pickled batches in a CIFAR archive or extracted folder."""
    if archive.is_dir():
        root = archive / folder if (archive / folder).is_dir() else archive

        def read(member: str) -> dict:
            with open(root / member, "rb") as f:
                return pickle.load(f, encoding="bytes")
        return read

    def read(member: str) -> dict:
        # Only trusted archives: the official CIFAR format is Python pickle.
        with tarfile.open(archive, "r:*") as tar:
            f = tar.extractfile(f"{folder}/{member}")
            if f is None:
                raise KeyError(member)
            return pickle.load(f, encoding="bytes")
    return read


def read_cifar(path: str | Path, fine: bool) -> tuple:
    """Read CIFAR-10 (``fine=False``) or CIFAR-100 from the official python archive.

    ``path`` is ``cifar-10-python.tar.gz`` / ``cifar-100-python.tar.gz`` or the
    folder it extracts to. Images come out (N, 32, 32, 3) uint8.
    """
    path = Path(path)
    folder = "cifar-100-python" if fine else "cifar-10-batches-py"
    if not path.exists():
        raise DataError(f"dataset.path={path} does not exist")
    read = _cifar_members(path, folder)

    def images_labels(batch: dict):
        x = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        y = np.asarray(batch[b"fine_labels" if fine else b"labels"], dtype=np.int64)
        return x.transpose(0, 2, 3, 1), y

    try:
        if fine:
            x_train, y_train = images_labels(read("train"))
            x_test, y_test = images_labels(read("test"))
            names = read("meta")[b"fine_label_names"]
        else:
            parts = [images_labels(read(f"data_batch_{i}")) for i in range(1, 6)]
            x_train = np.concatenate([p[0] for p in parts])
            y_train = np.concatenate([p[1] for p in parts])
            x_test, y_test = images_labels(read("test_batch"))
            names = read("batches.meta")[b"label_names"]
    except (OSError, EOFError, KeyError, ValueError, pickle.UnpicklingError,
            tarfile.TarError, zlib.error) as e:
        raise DataError(
            f"{path} is not a readable {folder} archive ({one_line(e)}); "
            f"re-download it or point dataset.path at a good copy") from e
    return x_train, y_train, x_test, y_test, [n.decode() for n in names]


def _read_idx(path: Path) -> np.ndarray:
    """One IDX file (the MNIST format), gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(f"{path} is not readable ({one_line(e)}); re-download it or point "
                        f"dataset.path at a good copy") from e
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 8:
        raise DataError(f"{path} is not an IDX file of unsigned bytes")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise DataError(f"{path} is truncated: {body.size} bytes for shape {shape}")
    return body.reshape(shape)


def read_idx_folder(folder: str | Path) -> tuple:
    """MNIST / Fashion-MNIST from a folder with the four official IDX files."""
    folder = Path(folder)

    def find(stem: str) -> Path:
        for candidate in (folder / f"{stem}.gz", folder / stem):
            if candidate.exists():
                return candidate
        raise DataError(f"{folder} has no {stem}.gz (the four MNIST-format IDX files)")

    x_train = _read_idx(find("train-images-idx3-ubyte"))
    y_train = _read_idx(find("train-labels-idx1-ubyte")).astype(np.int64)
    x_test = _read_idx(find("t10k-images-idx3-ubyte"))
    y_test = _read_idx(find("t10k-labels-idx1-ubyte")).astype(np.int64)
    return x_train[..., None], y_train, x_test[..., None], y_test


# --- one loader per dataset name --------------------------------------------

def _download(name: str, load: Callable[[], tuple]) -> tuple:
    """Run a ``keras.datasets`` loader, or fail with the offline alternatives."""
    try:
        return load()
    except Exception as e:  # urllib, socket and HTTP errors all end up here
        raise DataError(
            f"could not download {name} ({one_line(e)}); "
            f"offline, set dataset.path to a local copy, or use dataset=digits "
            f"(ships with scikit-learn) or dataset=fashion_mnist (Debian's "
            f"dataset-fashion-mnist)") from e


def load_cifar(cfg: Mapping, fine: bool) -> tuple:
    name = "CIFAR-100" if fine else "CIFAR-10"
    if cfg.get("path"):
        return read_cifar(cfg["path"], fine)
    import keras

    if fine:
        (x_train, y_train), (x_test, y_test) = _download(
            name, lambda: keras.datasets.cifar100.load_data(label_mode="fine"))
    else:
        (x_train, y_train), (x_test, y_test) = _download(
            name, keras.datasets.cifar10.load_data)
    classes = [str(i) for i in range(100 if fine else 10)]
    return x_train, y_train.reshape(-1), x_test, y_test.reshape(-1), classes


def load_mnist_like(cfg: Mapping, keras_name: str) -> tuple:
    """MNIST or Fashion-MNIST: ``dataset.path``, then ``search_paths``, then download."""
    candidates = [cfg.get("path")] if cfg.get("path") else list(cfg.get("search_paths") or [])
    for folder in candidates:
        if Path(folder).is_dir():
            x_train, y_train, x_test, y_test = read_idx_folder(folder)
            break
        if cfg.get("path"):
            raise DataError(f"dataset.path={folder} is not a folder with the IDX files")
    else:
        import keras

        loader = getattr(keras.datasets, keras_name).load_data
        (x_train, y_train), (x_test, y_test) = _download(keras_name, loader)
        x_train, x_test = x_train[..., None], x_test[..., None]
    classes = list(cfg.get("class_names") or [str(i) for i in range(10)])
    return x_train, y_train, x_test, y_test, classes


def load_digits(cfg: Mapping) -> tuple:
    """scikit-learn's 8x8 digits: 1,797 real scans, no network needed."""
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    digits = sklearn_digits()
    x = digits.images.astype(np.float32)[..., None]
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=cfg["test_fraction"], stratify=y, random_state=cfg["split_seed"])
    return x_train, y_train, x_test, y_test, [str(c) for c in digits.target_names]


def _class_folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def _read_image_tree(root: Path, classes: list[str], size: int, channels: int):
    from PIL import Image, UnidentifiedImageError

    mode = "L" if channels == 1 else "RGB"
    images, labels = [], []
    not_images = Counter()  # suffix -> files skipped for not being images
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
                with Image.open(file) as image:
                    image = image.convert(mode).resize((size, size), Image.BILINEAR)
                    images.append(np.asarray(image, dtype=np.uint8).reshape(size, size, channels))
            except (OSError, UnidentifiedImageError, ValueError) as e:
                log.warning("skipping unreadable image %s (%s)", file, e)
                continue
            labels.append(label)
            count += 1
        if count == 0 and folder.is_dir():
            raise DataError(f"class folder {folder} has no readable images "
                            f"({', '.join(IMAGE_SUFFIXES)})")
    if not_images:
        kinds = ", ".join(f"{n} {suffix}" for suffix, n in sorted(not_images.items()))
        log.warning("skipped %d file(s) in the class folders of %s that are not images (%s); "
                    "only %s are read", sum(not_images.values()), root, kinds,
                    " ".join(IMAGE_SUFFIXES))
    return np.stack(images), np.asarray(labels, dtype=np.int64)


def load_image_folder(cfg: Mapping) -> tuple:
    """Class-per-folder images of any size, resized to ``dataset.image_size``.

    ``path/train/<class>/*`` with ``path/test/<class>/*`` (or ``val/``) when
    present; otherwise ``path/<class>/*`` split by ``test_fraction``.
    """
    if not cfg.get("path"):
        raise DataError("dataset=image_folder needs dataset.path=<folder of class folders>")
    root = Path(cfg["path"])
    if not root.is_dir():
        raise DataError(f"dataset.path={root} is not a folder")
    train_root = root / "train" if (root / "train").is_dir() else root
    test_root = next((root / s for s in ("test", "val") if (root / s).is_dir()), None)
    classes = [p.name for p in _class_folders(train_root)
               if p.name not in ("train", "test", "val")]
    if not classes:
        raise DataError(f"dataset.path={root} has no class folders")
    size, channels = int(cfg["image_size"]), int(cfg["channels"])
    x, y = _read_image_tree(train_root, classes, size, channels)
    if test_root is not None:
        x_test, y_test = _read_image_tree(test_root, classes, size, channels)
        return x, y, x_test, y_test, classes
    from sklearn.model_selection import train_test_split

    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=cfg["test_fraction"], random_state=cfg["split_seed"])
    return x_train, y_train, x_test, y_test, classes


def check_source(cfg: Mapping) -> None:
    """The cheap part of loading: the paths exist. Run for every job of a sweep
    before the first one trains, so a bad path fails in seconds, not hours in."""
    name, path = cfg["name"], cfg.get("path")
    if name not in LOADERS:
        raise DataError(f"dataset.name={name!r} is not one of {', '.join(LOADERS)}")
    if name == "image_folder" and not path:
        raise DataError("dataset=image_folder needs dataset.path=<folder of class folders>")
    if path and not Path(path).exists():
        raise DataError(f"dataset.path={path} does not exist")


LOADERS: dict[str, Callable[[Mapping], tuple]] = {
    "cifar100": lambda cfg: load_cifar(cfg, fine=True),
    "cifar10": lambda cfg: load_cifar(cfg, fine=False),
    "fashion_mnist": lambda cfg: load_mnist_like(cfg, "fashion_mnist"),
    "mnist": lambda cfg: load_mnist_like(cfg, "mnist"),
    "digits": load_digits,
    "image_folder": load_image_folder,
}


# --- splitting ---------------------------------------------------------------

def _subset(x, y, limit, split_seed):
    """The first ``limit`` examples of a fixed shuffle: the same for every run."""
    if limit is None or limit >= len(x):
        return x, y
    keep = np.random.default_rng(split_seed).permutation(len(x))[: int(limit)]
    keep.sort()
    return x[keep], y[keep]


def load_dataset(cfg: Mapping, seed: int) -> Dataset:
    """Load ``cfg.name`` and split a validation set off the training data by ``seed``.

    The test split is fixed (never depends on the seed), so runs with different
    seeds are evaluated on the same images.
    """
    name = cfg["name"]
    if name not in LOADERS:
        raise DataError(f"dataset.name={name!r} is not one of {', '.join(LOADERS)}")
    x_train, y_train, x_test, y_test, classes = LOADERS[name](cfg)
    split_seed = int(cfg.get("split_seed", 0))
    x_train, y_train = _subset(x_train, y_train, cfg.get("limit_train"), split_seed)
    x_test, y_test = _subset(x_test, y_test, cfg.get("limit_test"), split_seed)
    n_val = int(round(len(x_train) * float(cfg["validation_fraction"])))
    order = np.random.default_rng(seed).permutation(len(x_train))
    val, train = order[:n_val], order[n_val:]
    as_float = lambda a: np.ascontiguousarray(a, dtype=np.float32)  # noqa: E731
    return Dataset(
        name=name,
        x_train=as_float(x_train[train]), y_train=y_train[train],
        x_val=as_float(x_train[val]), y_val=y_train[val],
        x_test=as_float(x_test), y_test=np.asarray(y_test, dtype=np.int64),
        class_names=classes,
    )


# --- one load per process ----------------------------------------------------

_CACHE: dict = {}


def load_dataset_cached(cfg: Mapping, seed: int) -> Dataset:
    """:func:`load_dataset`, reused by the next job in the same process.

    A basic-launcher sweep runs its jobs one after another in one process, all
    on the same dataset: reading, decoding and converting it once saves that
    work per job. The key is the whole dataset config and the seed (the
    validation split depends on it); only the latest entry is kept, so memory
    does not grow over a sweep. The arrays are read-only, so no job can change
    what the next one sees.
    """
    import json

    key = (json.dumps(dict(cfg), sort_keys=True, default=str), int(seed))
    if key not in _CACHE:
        _CACHE.clear()  # drop the old arrays before loading new ones
        data = load_dataset(cfg, seed)
        for name in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test"):
            getattr(data, name).flags.writeable = False
        _CACHE[key] = data
    return _CACHE[key]
