"""Every read of a dataset's files: one small function per kind of read.

A data folder is the user's, and anything can lie in it. So each read here
opens a *regular* file only: the open never blocks (``O_NONBLOCK``: a FIFO
planted under an image's name opens at once and is then refused, where a plain
``open`` waits forever for a writer), and the opened file, not the name, is
checked (``fstat``), so a name swapped between a listing and the open is
caught too. Devices (``/dev/zero``), FIFOs and sockets are refused in one line
naming what they are, and every read stops at a size cap.

Symbolic links are followed for reading: a data folder whose class folders
or files are links to elsewhere reads what they point at, and the data
fingerprint (:mod:`ablation.data.fingerprint`) hashes exactly that, as it walks
the same listing (:func:`kind`, :func:`ablation.data.images.image_folder_files`).
"""
from __future__ import annotations

import gzip
import hashlib
import os
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

# What one read may take: any data file streamed (hashed, or an archive read
# member by member), and what is read whole into memory (a pickled batch, an
# IDX file; the largest official one, CIFAR-100's train batch, is 155 MB).
MAX_FILE_BYTES = 8 << 30
MAX_READ_BYTES = 1 << 30


class NotAFile(OSError):
    """A path that is not a regular file (a folder, device, FIFO or socket)."""


class TooBig(OSError):
    """A file or archive member over the size cap of its read."""


def shown(path) -> str:
    """A path as text any log or terminal can take: bytes that are not UTF-8
    (kept by Python as surrogates) are written as ``\\xNN``."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _what(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def kind(path: Path) -> str:
    """What ``path`` is, links followed, without opening it: ``file``, ``folder``,
    ``missing`` (nothing there, or a link to nothing) or ``special`` (a FIFO,
    socket or device: never to be opened)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError:  # a link loop, a name too long, no permission to look
        return "missing"
    if stat.S_ISREG(mode):
        return "file"
    return "folder" if stat.S_ISDIR(mode) else "special"


def describe(path: Path) -> str:
    """``a FIFO (named pipe)``, ``a character device``, ... for a refusal."""
    try:
        return _what(os.stat(path).st_mode)
    except OSError as e:
        return f"unreadable ({e.strerror or e})"


def size(path: Path) -> int:
    """Bytes in a regular file (links followed), without opening it."""
    return os.stat(path).st_size


def open_regular(path: Path, limit: int = MAX_FILE_BYTES) -> BinaryIO:
    """``path`` opened for binary reading: a regular file of at most ``limit``
    bytes, or :class:`NotAFile` / :class:`TooBig`. Never blocks on the open."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotAFile(f"{shown(path)} is {_what(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise TooBig(f"{shown(path)} is {info.st_size:,} bytes, over the "
                         f"{limit:,}-byte cap")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _capped(f: BinaryIO, limit: int, what) -> bytes:
    data = f.read(limit + 1)
    if len(data) > limit:
        raise TooBig(f"{what} holds over {limit:,} bytes (the cap)")
    return data


def read_file(path: Path, limit: int = MAX_READ_BYTES) -> bytes:
    """The bytes of one regular file."""
    with open_regular(path, limit) as f:
        return _capped(f, limit, shown(path))


def read_gzip(path: Path, limit: int = MAX_READ_BYTES) -> bytes:
    """The decompressed bytes of one gzip file, at most ``limit`` of them
    (a small file that unpacks to gigabytes stops there)."""
    with open_regular(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as f:
        return _capped(f, limit, f"{shown(path)} (decompressed)")


def read_tar_members(archive: Path, names: Iterable[str],
                     limit: int = MAX_READ_BYTES) -> dict[str, bytes]:
    """The named regular members of a tar archive (gzip, bzip2, xz or plain),
    read in one pass over it; a name it does not hold is absent from the result.
    A name held twice gives its last copy, as ``tarfile`` does."""
    wanted, found = set(names), {}
    with open_regular(archive) as raw, tarfile.open(fileobj=raw, mode="r|*") as tar:
        for member in tar:
            name = member.name.removeprefix("./")
            if name not in wanted:
                continue
            if not member.isfile():
                raise NotAFile(f"{name} in the archive is not a regular file")
            f = tar.extractfile(member)
            found[name] = _capped(f, limit, name)
    return found


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of one regular file, streamed."""
    h = hashlib.sha256()
    with open_regular(path) as f:
        read = 0
        for chunk in iter(lambda: f.read(1 << 20), b""):
            read += len(chunk)
            if read > MAX_FILE_BYTES:
                raise TooBig(f"{shown(path)} grew past {MAX_FILE_BYTES:,} bytes (the cap)")
            h.update(chunk)
    return h.hexdigest()


def list_folder(folder: Path) -> list[Path]:
    """A folder's entries (links not resolved), hidden names left out, sorted."""
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))
