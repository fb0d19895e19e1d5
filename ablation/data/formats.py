"""The real file formats, read into numpy: CIFAR's pickled batches and MNIST's
IDX files (class-per-folder images: :mod:`ablation.data.images`)."""
from __future__ import annotations

import gzip
import pickle
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

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
