"""Datasets as numpy arrays in memory, split into train / validation / test.

Small datasets fit in memory, and plain numpy keeps the input pipeline
backend-neutral: augmentation runs inside the model (see
:mod:`ablation.augment`). Every loader reads the real files
(:mod:`ablation.data.formats`); network downloads go through
``keras.datasets`` and fail with one line that names the offline alternatives.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ablation.data import raw_files
from ablation.files import shown
from ablation.data.formats import (DataError, cifar_folder_files, idx_files, one_line, read_cifar,
                                   read_idx_folder)
from ablation.data.images import image_folder_files, image_folder_layout, read_image_tree


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
    if cfg["path"]:
        return read_cifar(cfg["path"], fine)
    import keras

    dataset = keras.datasets.cifar100 if fine else keras.datasets.cifar10  # 100: fine labels
    (x_train, y_train), (x_test, y_test) = _download(name, dataset.load_data)
    classes = [str(i) for i in range(100 if fine else 10)]
    return x_train, y_train.reshape(-1), x_test, y_test.reshape(-1), classes


def _idx_folder(cfg: Mapping) -> Path | None:
    """The MNIST-format folder: ``dataset.path``, else the first of ``search_paths`` there."""
    candidates = [cfg["path"]] if cfg["path"] else list(cfg["search_paths"])
    return next((Path(f) for f in candidates if raw_files.kind(Path(f)) == "folder"), None)


def load_mnist_like(cfg: Mapping, keras_name: str) -> tuple:
    """MNIST or Fashion-MNIST: ``dataset.path``, then ``search_paths``, then download."""
    folder = _idx_folder(cfg)
    if folder is None and cfg["path"]:
        raise DataError(f"dataset.path={cfg['path']} is not a folder with the IDX files")
    if folder is not None:
        x_train, y_train, x_test, y_test = read_idx_folder(folder)
    else:
        import keras

        loader = getattr(keras.datasets, keras_name).load_data
        (x_train, y_train), (x_test, y_test) = _download(keras_name, loader)
        x_train, x_test = x_train[..., None], x_test[..., None]
    classes = list(cfg["class_names"] or [str(i) for i in range(10)])
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


def load_image_folder(cfg: Mapping) -> tuple:
    """Class-per-folder images of any size, resized to ``dataset.image_size``.

    ``path/train/<class>/*`` with ``path/test/<class>/*`` (or ``val/``) when
    present; otherwise ``path/<class>/*`` split by ``test_fraction``. Every
    class needs two usable images where it is split (one to train on, one to
    validate or test on); fewer is refused naming the class.
    """
    if not cfg["path"]:
        raise DataError("dataset=image_folder needs dataset.path=<folder of class folders>")
    root = Path(cfg["path"])
    if raw_files.kind(root) != "folder":
        raise DataError(f"dataset.path={shown(root)} is not a folder")
    train_root, test_root, folders = image_folder_layout(root)
    if not folders:
        raise DataError(f"dataset.path={shown(root)} has no class folders")
    classes = [shown(name) for name in folders]  # names that any log or record can hold
    size, channels = int(cfg["image_size"]), int(cfg["channels"])
    x, y = read_image_tree(train_root, folders, size, channels, minimum=2)
    if test_root is not None:
        x_test, y_test = read_image_tree(test_root, folders, size, channels)
        return x, y, x_test, y_test, classes
    from sklearn.model_selection import train_test_split

    fraction = float(cfg["test_fraction"])
    n_test = math.ceil(fraction * len(x))  # as scikit-learn rounds it
    if n_test < 1 or len(x) - n_test < 2:
        smallest = int(np.argmin(np.bincount(y, minlength=len(classes))))
        raise DataError(
            f"dataset.path={shown(root)} has {len(x)} usable images, too few to split into "
            f"train, validation and test with dataset.test_fraction={fraction} (the smallest "
            f"class, {classes[smallest]!r}, has {int(np.sum(y == smallest))}); add images")
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=cfg["test_fraction"], random_state=cfg["split_seed"])
    return x_train, y_train, x_test, y_test, classes


SYNTHETIC_KEYS = ("train_size", "test_size", "num_classes", "image_size", "channels")


def load_synthetic(cfg: Mapping) -> tuple:
    """Random images and labels of a real dataset's shape and size, for timing only.

    Drawn from ``split_seed``, so every job of a sweep gets the same arrays;
    uint8 like a decoded dataset, so loading, normalisation and the input
    pipeline cost what they would. Nothing can be learnt from them: a model's
    accuracy on them is chance, and the report says so.
    """
    check_source(cfg)
    rng = np.random.default_rng(int(cfg["split_seed"]))
    size, channels = int(cfg["image_size"]), int(cfg["channels"])
    classes = int(cfg["num_classes"])

    def split(n: int) -> tuple[np.ndarray, np.ndarray]:
        shape = (int(n), size, size, channels)
        images = np.frombuffer(rng.bytes(int(np.prod(shape))), np.uint8).reshape(shape)
        return images, rng.integers(0, classes, size=int(n)).astype(np.int64)

    (x_train, y_train), (x_test, y_test) = split(cfg["train_size"]), split(cfg["test_size"])
    return x_train, y_train, x_test, y_test, [f"class_{i}" for i in range(classes)]


def check_source(cfg: Mapping) -> None:
    """The cheap part of loading: the paths exist. Run for every job of a sweep
    before the first one trains, so a bad path fails in seconds, not hours in."""
    name, path = cfg["name"], cfg["path"]
    if name not in LOADERS:
        raise DataError(f"dataset.name={name!r} is not one of {', '.join(LOADERS)}")
    if name == "synthetic":
        missing = [k for k in SYNTHETIC_KEYS if cfg[k] is None]
        if missing:
            raise DataError(f"dataset=synthetic needs {', '.join('dataset.' + k for k in missing)} "
                            f"(see conf/dataset/synthetic_cifar100.yaml)")
    if name == "image_folder" and not path:
        raise DataError("dataset=image_folder needs dataset.path=<folder of class folders>")
    if path:
        what = raw_files.kind(Path(path))
        if what == "missing":
            raise DataError(f"dataset.path={shown(path)} does not exist")
        if what == "special":  # /dev/zero, a FIFO: never opened, never waited on
            raise DataError(f"dataset.path={shown(path)} is {raw_files.describe(Path(path))}, not a "
                            f"data file or folder: point it at the archive or folder")


def source_files(cfg: Mapping) -> tuple[Path, list[Path]] | None:
    """What the loader of ``cfg`` reads from disk, by the loaders' own listings, for
    the data fingerprint: (the file or folder, the files it opens there in order; a
    file alone is its own list), or None for data read from no file of the user's.
    A file the loader would refuse is left for it to name, or refused here."""
    name = cfg["name"]
    if name in ("mnist", "fashion_mnist"):
        source = _idx_folder(cfg) or (Path(cfg["path"]) if cfg["path"] else None)
    else:
        source = Path(cfg["path"]) if name in ("cifar10", "cifar100", "image_folder") \
            and cfg["path"] else None
    if source is None:
        return None
    what = raw_files.kind(source)
    if what == "special":
        check_source(cfg)  # the one-line refusal
    if what != "folder":
        return source, [source]
    if name == "image_folder":
        return source, image_folder_files(source)
    if name in ("cifar10", "cifar100"):
        return source, [f for f in cifar_folder_files(source, fine=name == "cifar100")
                        if raw_files.kind(f) != "missing"]
    return source, idx_files(source)


LOADERS: dict[str, Callable[[Mapping], tuple]] = {
    "cifar100": lambda cfg: load_cifar(cfg, fine=True),
    "cifar10": lambda cfg: load_cifar(cfg, fine=False),
    "fashion_mnist": lambda cfg: load_mnist_like(cfg, "fashion_mnist"),
    "mnist": lambda cfg: load_mnist_like(cfg, "mnist"),
    "digits": load_digits,
    "image_folder": load_image_folder,
    "synthetic": load_synthetic,
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
    split_seed = int(cfg["split_seed"])
    x_train, y_train = _subset(x_train, y_train, cfg["limit_train"], split_seed)
    x_test, y_test = _subset(x_test, y_test, cfg["limit_test"], split_seed)
    n_val = int(round(len(x_train) * float(cfg["validation_fraction"])))
    if len(x_train) - n_val < 1 or len(x_test) < 1:
        raise DataError(
            f"dataset {name} has {len(x_train)} training and {len(x_test)} test image(s) here, "
            f"too few to split with dataset.validation_fraction={cfg['validation_fraction']}: "
            f"use more images (dataset.limit_train, dataset.limit_test)")
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
    """:func:`load_dataset`, reused by the next job of a sweep in the same process.

    The key is the whole dataset config and the seed (the validation split
    depends on it); only the latest entry is kept, and its arrays are
    read-only, so no job can change what the next one sees.
    """
    key = (json.dumps(dict(cfg), sort_keys=True, default=str), int(seed))
    if key not in _CACHE:
        _CACHE.clear()  # drop the old arrays before loading new ones
        data = load_dataset(cfg, seed)
        for name in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test"):
            getattr(data, name).flags.writeable = False
        _CACHE[key] = data
    return _CACHE[key]
