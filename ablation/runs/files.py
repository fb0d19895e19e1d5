"""Writing the suite's files: atomically, with one mode, and setting old ones aside.

Every file the suite writes goes through :func:`atomic_write` (a unique
temporary name, fsync, rename), so a reader never sees half a file, no two
processes ever write the same temporary file, and every output gets the mode
``open()`` would give it. Outputs that are replaced are never deleted: they
move to ``<folder>/.replaced/<time>/`` (:func:`set_aside`), a hidden folder
the reporter and ``wandb sync .../wandb/offline-run-*`` do not read.
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

REPLACED_DIR = ".replaced"


def _umask() -> int:
    """The process umask; read from /proc where it can be (setting it to read it
    back is not thread-safe)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def output_mode() -> int:
    """The mode every output file gets: 0666 less the umask (0644 under umask 022),
    as ``open()`` would give it; ``mkstemp``'s private 0600 is never kept."""
    return 0o666 & ~_umask()


def unique_tmp(directory: str | Path, prefix: str, suffix: str = ".tmp") -> tuple[int, Path]:
    """A new temporary file in ``directory`` that no other process can pick
    (``mkstemp``), already given :func:`output_mode`: (open descriptor, path)."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    try:
        os.fchmod(fd, output_mode())
    except BaseException:
        os.close(fd)
        Path(name).unlink(missing_ok=True)
        raise
    return fd, Path(name)


@contextlib.contextmanager
def temporary_beside(directory: str | Path, prefix: str, suffix: str) -> Iterator[Path]:
    """A :func:`unique_tmp` name for a writer that opens the file itself (Keras's
    ``save``), to be renamed into place; removed if it was not."""
    fd, name = unique_tmp(directory, prefix, suffix)
    os.close(fd)
    try:
        yield name
    finally:
        name.unlink(missing_ok=True)


def fsync_path(path: str | Path) -> None:
    """fsync a file written by someone else, or a folder (its renames)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | Path, data: str | bytes, *, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (unique temporary file, fsync, rename),
    with :func:`output_mode`. Every writer of the suite's outputs goes through it:
    a reader never sees half a file, and every output has the same mode."""
    path = Path(path)
    fd, tmp = unique_tmp(path.parent, f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


class UnsafeFile(OSError):
    """A path the suite refuses to read or write: a link, not a regular file, too large."""


def read_regular(path: str | Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes.

    Opened without following a link (``O_NOFOLLOW``) and without blocking (a
    FIFO would otherwise wait for a writer forever); checked on the open
    descriptor, so it cannot be swapped between the check and the read."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeFile(f"{path} is a symbolic link: not followed") from None
        raise
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"{path} is not a regular file")
        if info.st_size > limit:
            raise UnsafeFile(f"{path} is {info.st_size:,} bytes, more than the "
                             f"{limit:,} a file of this kind can be")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(f"{path} grew past {limit:,} bytes while it was read")
    return data


def check_results_dir(results_dir: str) -> Path:
    """``results_dir`` (absolute) as a safe place for a sweep, or :class:`UnsafeFile`
    saying why.

    Refused: empty (the sweep would land at the file system's root), the root
    itself, something that is not a folder, and a folder that cannot be
    created or written (read-only, another user's)."""
    text = str(results_dir or "").strip()
    if not text:
        raise UnsafeFile("results_dir is empty: the sweep would be written at the file "
                         "system's root; set results_dir=<a folder>, e.g. results")
    path = Path(text).expanduser()
    resolved = path.resolve()
    if resolved == Path(resolved.anchor):
        raise UnsafeFile(f"results_dir={text} is the file system's root: set "
                         f"results_dir=<a folder below it>, e.g. results")
    existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise UnsafeFile(f"results_dir={text}: {existing} is not a folder")
    try:  # a real try, not os.access: root passes that on a read-only file system
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as e:
        what = "cannot be written" if existing == path.absolute() else \
            f"cannot be created ({existing} is not writable)"
        raise UnsafeFile(f"results_dir={text} {what}: {e.strerror or e}; set "
                         f"results_dir=<a writable folder>") from None
    return path.absolute()  # a results_dir that is itself a link is the user's choice


def check_no_links(root: str | Path, folder: str | Path, names=()) -> None:
    """Refuse (:class:`UnsafeFile`) a ``folder`` that would put the suite's
    writes outside ``root``: a symbolic link on the way from ``root`` down to it,
    a path that leads out of ``root``, or a link planted at one of ``names``
    inside it (a lock, a record, a log: files the suite opens for writing)."""
    root, folder = Path(root).absolute(), Path(folder).absolute()
    if not folder.resolve().is_relative_to(root.resolve()):
        raise UnsafeFile(f"{folder} is outside results_dir {root}: refused")
    path = root
    for part in folder.relative_to(root).parts if folder.is_relative_to(root) else ():
        path = path / part
        if path.is_symlink():
            raise UnsafeFile(f"{path} is a symbolic link: the suite writes only inside "
                             f"results_dir and follows no links; remove it")
    for name in names:
        if (folder / name).is_symlink():
            raise UnsafeFile(f"{folder / name} is a symbolic link where the suite writes its "
                             f"own file: remove it")


def replaced_folder(folder: str | Path) -> Path:
    """A new ``<folder>/.replaced/<time>/`` path (not created) for outputs set aside now."""
    return Path(folder) / REPLACED_DIR / datetime.now().strftime("%Y%m%d-%H%M%S-%f")


def set_aside(paths: Iterable[str | Path], target: str | Path) -> list[Path]:
    """Move each of ``paths`` that exists into the folder ``target`` (created
    when there is something to move); returns their new paths."""
    paths = [Path(p) for p in paths if os.path.lexists(p)]
    target = Path(target)
    if paths:
        target.mkdir(parents=True, exist_ok=True)
    moved = []
    for path in paths:
        path.rename(target / path.name)
        moved.append(target / path.name)
    return moved
