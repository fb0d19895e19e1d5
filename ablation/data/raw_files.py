"""A dataset's raw files, read through the file door with links followed.

A data folder is the user's, and anything can lie in it. Each read here opens a
*regular* file only (:func:`ablation.files.open_file`): the open never blocks,
the opened file (not the name) is checked, devices, FIFOs and sockets are
refused in one line, and every read stops at a size cap.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path

from ablation.files import NotAFile, TooBig, open_file, read_capped, shown, what_is

# What one read may take: any data file streamed (hashed, or an archive read
# member by member), and what is read whole into memory (a pickled batch, an
# IDX file; the largest official one, CIFAR-100's train batch, is 155 MB).
MAX_FILE_BYTES = 8 << 30
MAX_READ_BYTES = 1 << 30


def kind(path: Path) -> str:
    """What ``path`` is, links followed, without opening it: ``file``, ``folder``,
    ``missing`` (nothing there, or a link to nothing) or ``special`` (a FIFO,
    socket or device: never to be opened)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # nothing there, a link loop, a name too long, no permission to look
        return "missing"
    if stat.S_ISREG(mode):
        return "file"
    return "folder" if stat.S_ISDIR(mode) else "special"


def describe(path: Path) -> str:
    """``a FIFO (named pipe)``, ``a character device``, ... for a refusal."""
    try:
        return what_is(os.stat(path).st_mode)
    except OSError as e:
        return f"unreadable ({e.strerror or e})"


def read_gzip(path: Path, limit: int = MAX_READ_BYTES) -> bytes:
    """The decompressed bytes of one gzip file, at most ``limit`` of them
    (a small file that unpacks to gigabytes stops there)."""
    with open_file(path, MAX_FILE_BYTES, follow_links=True) as raw, \
            gzip.GzipFile(fileobj=raw, mode="rb") as f:
        return read_capped(f, limit, f"{shown(path)} (decompressed)")


def read_tar_members(archive: Path, names: Iterable[str],
                     limit: int = MAX_READ_BYTES) -> dict[str, bytes]:
    """The named regular members of a tar archive (gzip, bzip2, xz or plain),
    read in one pass over it; a name it does not hold is absent from the result.
    A name held twice gives its last copy, as ``tarfile`` does."""
    wanted, found = set(names), {}
    with open_file(archive, MAX_FILE_BYTES, follow_links=True) as raw, \
            tarfile.open(fileobj=raw, mode="r|*") as tar:
        for member in tar:
            name = member.name.removeprefix("./")
            if name not in wanted:
                continue
            if not member.isfile():
                raise NotAFile(f"{name} in the archive is not a regular file")
            f = tar.extractfile(member)
            found[name] = read_capped(f, limit, name)
    return found


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of one regular file, streamed."""
    h = hashlib.sha256()
    with open_file(path, MAX_FILE_BYTES, follow_links=True) as f:
        read = 0
        for chunk in iter(lambda: f.read(1 << 20), b""):
            read += len(chunk)
            if read > MAX_FILE_BYTES:
                raise TooBig(f"{shown(path)} grew past {MAX_FILE_BYTES:,} bytes (the cap)")
            h.update(chunk)
    return h.hexdigest()
