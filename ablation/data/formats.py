"""The real file formats, read into numpy: CIFAR's pickled batches and MNIST's
IDX files (class-per-folder images: :mod:`ablation.data.images`). Every file
is opened through :mod:`ablation.files` (regular files only, capped)."""
from __future__ import annotations

import io
import lzma
import pickle
import tarfile
import zlib
from pathlib import Path

import numpy as np

from ablation import files
from ablation.data import raw_files
from ablation.files import read_bytes, shown


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


# What a CIFAR python batch may ask the unpickler for: numpy's array and dtype
# rebuilders (the official batches, pickled by Python 2 with numpy 1, name them
# under numpy.core; numpy 2 under numpy._core; protocol 5 uses _frombuffer).
# Taken from numpy itself, so whichever numpy is installed serves both names.
def _allowed_globals() -> dict[tuple[str, str], object]:
    sample = np.zeros(1, np.uint8)
    reconstruct, frombuffer = sample.__reduce__()[0], sample.__reduce_ex__(5)[0]
    allowed = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype}
    for core in ("numpy.core", "numpy._core"):
        allowed[(f"{core}.multiarray", "_reconstruct")] = reconstruct
        allowed[(f"{core}.numeric", "_frombuffer")] = frombuffer
    return allowed


class Forbidden(pickle.UnpicklingError):
    """A pickle that asks for something other than containers, bytes, numbers and arrays."""


class _BatchUnpickler(pickle.Unpickler):
    """Python's unpickler with every global refused but numpy's array rebuilders:
    a batch can build dicts, lists, tuples, bytes, strings, numbers and numpy
    arrays, and nothing can run code (no ``__reduce__`` to ``os.system``)."""

    allowed = _allowed_globals()

    def find_class(self, module: str, name: str):
        try:
            return self.allowed[(module, name)]
        except KeyError:
            raise Forbidden(f"{module}.{name}") from None

    def persistent_load(self, pid):
        raise Forbidden("a persistent id")


def unpickle_batch(data: bytes, where: str):
    """One CIFAR batch from its pickled bytes, by :class:`_BatchUnpickler`;
    ``where`` names the file (and member) in a refusal."""
    try:
        return _BatchUnpickler(io.BytesIO(data), encoding="bytes").load()
    except Forbidden as e:
        raise DataError(f"{where} is not a plain CIFAR batch: it asks to run {e} (only dicts, "
                        f"lists, bytes, numbers and numpy arrays are read); {GOOD_COPY}") from None
    except Exception as e:  # any malformed pickle: truncated, bad opcodes, bad array state
        raise DataError(f"{where} is not a readable CIFAR batch ({one_line(e)}); "
                        f"{GOOD_COPY}") from None


GOOD_COPY = "re-download it or point dataset.path at a good copy"


def cifar_members(fine: bool) -> tuple[str, list[str]]:
    """The folder an official CIFAR archive extracts to, and the batch files read from it."""
    if fine:
        return "cifar-100-python", ["train", "test", "meta"]
    return "cifar-10-batches-py", [*(f"data_batch_{i}" for i in range(1, 6)), "test_batch",
                                   "batches.meta"]


def cifar_folder_files(path: Path, fine: bool) -> list[Path]:
    """The batch files read from an extracted CIFAR folder: ``path/<folder>/...``
    where that folder is there, else ``path/...``."""
    folder, members = cifar_members(fine)
    root = path / folder if raw_files.kind(path / folder) == "folder" else path
    return [root / member for member in members]


def _cifar_batches(path: Path, fine: bool) -> dict[str, object]:
    """Every batch of a CIFAR archive or extracted folder, unpickled safely, by member name."""
    folder, members = cifar_members(fine)
    if raw_files.kind(path) == "folder":
        raw = {}
        for file, member in zip(cifar_folder_files(path, fine), members):
            raw[member] = (read_bytes(file, raw_files.MAX_READ_BYTES, follow_links=True), shown(file))
    else:
        found = raw_files.read_tar_members(path, [f"{folder}/{m}" for m in members])
        missing = [m for m in members if f"{folder}/{m}" not in found]
        if missing:
            raise DataError(f"{shown(path)} has no {folder}/{missing[0]}: it is not a {folder} "
                            f"archive; {GOOD_COPY}")
        raw = {m: (found[f"{folder}/{m}"], f"{shown(path)}:{folder}/{m}") for m in members}
    # unpickled one by one, each batch's bytes dropped once it is read
    return {m: (unpickle_batch(raw.pop(m)[0], where), where)
            for m, where in [(m, raw[m][1]) for m in members]}


def _field(batch, key: bytes, where: str):
    if not isinstance(batch, dict):
        raise DataError(f"{where} is not a CIFAR batch (a pickled {type(batch).__name__}, not "
                        f"a dict); {GOOD_COPY}")
    if key not in batch:
        raise DataError(f"{where} is not a CIFAR batch: it has no {key!r} entry; {GOOD_COPY}")
    return batch[key]


def _images_labels(batch, where: str, label_key: bytes, classes: int):
    """(N, 32, 32, 3) uint8 images and N int64 labels in [0, classes), or one line."""
    data = _field(batch, b"data", where)
    labels = _field(batch, label_key, where)
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2
            and data.shape[1] == 3 * 32 * 32):
        got = (f"{data.dtype} {data.shape}" if isinstance(data, np.ndarray)
               else type(data).__name__)
        raise DataError(f"{where} is not a CIFAR batch: its b'data' is {got}, not uint8 rows "
                        f"of 3072 bytes; {GOOD_COPY}")
    y = np.asarray(labels) if isinstance(labels, (list, tuple, np.ndarray)) else None
    if y is None or y.ndim != 1 or (len(y) and y.dtype.kind not in "iu"):
        raise DataError(f"{where} is not a CIFAR batch: its {label_key!r} is not a list of "
                        f"integers; {GOOD_COPY}")
    if len(y) != len(data):
        raise DataError(f"{where} is not a CIFAR batch: {len(data)} images but {len(y)} labels; "
                        f"{GOOD_COPY}")
    if len(y) and (y.min() < 0 or y.max() >= classes):
        raise DataError(f"{where} is not a CIFAR batch: a label ({int(y.min())} to "
                        f"{int(y.max())}) outside its {classes} classes; {GOOD_COPY}")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), y.astype(np.int64)


def _names(batch, where: str, key: bytes) -> list[str]:
    names = _field(batch, key, where)
    if not (isinstance(names, list) and names
            and all(isinstance(n, (bytes, str)) for n in names)):
        raise DataError(f"{where} is not a CIFAR meta batch: its {key!r} is not a list of "
                        f"names; {GOOD_COPY}")
    return [n.decode("utf-8", "backslashreplace") if isinstance(n, bytes) else n for n in names]


def read_cifar(path: str | Path, fine: bool) -> tuple:
    """Read CIFAR-10 (``fine=False``) or CIFAR-100 from the official python archive.

    ``path`` is ``cifar-10-python.tar.gz`` / ``cifar-100-python.tar.gz`` or the
    folder it extracts to. Images come out (N, 32, 32, 3) uint8. The batches
    are Python pickles: they are read by an unpickler that builds only plain
    containers, bytes, numbers and numpy arrays (:class:`_BatchUnpickler`), and
    anything but a well-formed batch is refused in one line naming the file.
    """
    path = Path(path)
    folder, members = cifar_members(fine)
    if raw_files.kind(path) == "missing":
        raise DataError(f"dataset.path={shown(path)} does not exist")
    try:
        batches = _cifar_batches(path, fine)
    except (files.NotAFile, files.TooBig) as e:  # the message names the file
        raise DataError(f"{e}; {GOOD_COPY}") from None
    except (OSError, EOFError, ValueError, tarfile.TarError, zlib.error, lzma.LZMAError) as e:
        raise DataError(f"{shown(path)} is not a readable {folder} archive ({one_line(e)}); "
                        f"{GOOD_COPY}") from e
    meta, where = batches[members[-1]]
    names = _names(meta, where, b"fine_label_names" if fine else b"label_names")
    label_key = b"fine_labels" if fine else b"labels"
    parts = {m: _images_labels(batch, where, label_key, len(names))
             for m, (batch, where) in batches.items() if m != members[-1]}
    test = parts.pop("test" if fine else "test_batch")
    x_train = np.concatenate([x for x, _ in parts.values()])
    y_train = np.concatenate([y for _, y in parts.values()])
    return x_train, y_train, test[0], test[1], names


def _read_idx(path: Path) -> np.ndarray:
    """One IDX file (the MNIST format), gzipped or not."""
    try:
        data = raw_files.read_gzip(path) if path.suffix == ".gz" else read_bytes(
            path, raw_files.MAX_READ_BYTES, follow_links=True)
    except (files.NotAFile, files.TooBig) as e:  # the message names the file
        raise DataError(f"{e}; {GOOD_COPY}") from None
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(f"{shown(path)} is not readable ({one_line(e)}); {GOOD_COPY}") from e
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 8:
        raise DataError(f"{shown(path)} is not an IDX file of unsigned bytes")
    ndim = data[3]
    if len(data) < 4 + 4 * ndim:
        raise DataError(f"{shown(path)} is truncated: its header names {ndim} dimensions")
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise DataError(f"{shown(path)} is truncated: {body.size} bytes for shape {shape}")
    return body.reshape(shape)


def idx_files(folder: Path) -> list[Path]:
    """The four IDX files read from an MNIST-format folder (``.gz`` or not), in
    the order read: train images and labels, test images and labels."""
    found = []
    for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        for candidate in (folder / f"{stem}.gz", folder / stem):
            if raw_files.kind(candidate) != "missing":  # a FIFO or device is refused on reading
                found.append(candidate)
                break
        else:
            raise DataError(f"{shown(folder)} has no {stem}.gz (the four MNIST-format IDX files)")
    return found


def read_idx_folder(folder: str | Path) -> tuple:
    """MNIST / Fashion-MNIST from a folder with the four official IDX files."""
    x_train, y_train, x_test, y_test = (_read_idx(f) for f in idx_files(Path(folder)))
    return x_train[..., None], y_train.astype(np.int64), x_test[..., None], y_test.astype(np.int64)
