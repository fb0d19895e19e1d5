"""The suite's one door to the file system: every read, write, move, removal
and new folder goes through this module, with one policy.

- **Reading**: only regular files, opened without following a link and
  without blocking (a FIFO would wait for a writer forever), with a size cap
  (:func:`read_bytes`, :func:`read_text`, :func:`open_regular`). A link, a
  FIFO, a socket or a device is :class:`UnsafeFile`, one line.
- **Writing**: atomically (a unique temporary file in the same folder,
  fsync, rename), so a reader never sees half a file and no two processes
  write the same temporary file; the folder written into is opened without
  following a link and the temporary file is created exclusively in it, so a
  planted link is never written through (:func:`atomic_write`,
  :func:`save_with` for writers that want a path). Every output gets the
  mode ``open()`` would give it.
- **Folders**: made without passing through a link (:func:`make_folder`).
- **Moving aside and removing**: replaced outputs are never deleted but
  moved to ``<folder>/.replaced/<time>/`` (:func:`set_aside`), a hidden folder
  the reporter and ``wandb sync .../wandb/offline-run-*`` do not read; a link
  is never moved into or removed through, and removing a folder never follows
  a link inside it (:func:`remove_tree`). What may be set aside or removed
  at all is the caller's list of what it wrote (a report's ``report.json``,
  a job's known names).
- **Listing**: entries as they are, a link never taken for what it points at
  (:func:`entries`).

Nothing else in the package opens, renames, removes or makes a file or
folder; a structural test holds it to that.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
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
    """A new temporary file in ``directory`` (not a link) that no other process
    can pick (``mkstemp``), already given :func:`output_mode`: (open descriptor, path)."""
    os.close(_open_folder(directory))
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
    """Write ``data`` to ``path`` atomically, with :func:`output_mode`.

    The folder is opened without following a link, the temporary file created
    exclusively inside it and renamed over ``path`` there: a link planted at
    ``path``, at its temporary name or as the folder itself is never written
    through (a link at ``path`` is replaced, not followed)."""
    path = Path(path)
    folder = _open_folder(path.parent)
    tmp = f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), output_mode())
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
                f.flush()
                if fsync:
                    os.fsync(f.fileno())
            os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise
    finally:
        os.close(folder)
    return path


def save_with(path: str | Path, write: Callable[[Path], object], *, fsync: bool = True
              ) -> Path:
    """``write(temporary path)`` (Keras's ``save``, Matplotlib's ``savefig``), then
    the result renamed over ``path``: atomic as :func:`atomic_write` is."""
    path = Path(path)
    with temporary_beside(path.parent, f".{path.name}.", path.suffix or ".tmp") as tmp:
        write(tmp)
        if not os.path.isfile(tmp) or os.path.islink(tmp):
            raise UnsafeFile(f"{tmp} was not written as a regular file")
        if fsync:
            fsync_path(tmp)
        os.replace(tmp, path)
    return path


def _open_folder(folder: str | Path) -> int:
    """A descriptor of ``folder``, refused (:class:`UnsafeFile`) when it is a link."""
    try:
        return os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(folder):
            raise UnsafeFile(f"{folder} is a symbolic link: the suite does not write "
                             f"through links; remove it") from None
        raise


class UnsafeFile(OSError):
    """A path the suite refuses to read or write: a link, not a regular file, too large."""


def read_bytes(path: str | Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes.

    Opened without following a link (``O_NOFOLLOW``) and without blocking (a
    FIFO would otherwise wait for a writer forever); checked on the open
    descriptor, so it cannot be swapped between the check and the read."""
    with open_regular(path, limit) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(f"{path} grew past {limit:,} bytes while it was read")
    return data


read_regular = read_bytes  # the name the record and lock readers use


def read_text(path: str | Path, limit: int, errors: str = "strict") -> str:
    """:func:`read_bytes` decoded as UTF-8."""
    return read_bytes(path, limit).decode("utf-8", errors=errors)


def open_regular(path: str | Path, limit: int) -> io.BufferedReader:
    """``path`` opened for binary reading (a file object, for readers that
    stream: NumPy, PIL, pickle) if it is a regular file of at most ``limit``
    bytes, opened as :func:`read_bytes` opens it."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeFile(f"{path} is a symbolic link: not followed") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"{path} is not a regular file")
        if info.st_size > limit:
            raise UnsafeFile(f"{path} is {info.st_size:,} bytes, more than the "
                             f"{limit:,} a file of this kind can be")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def open_lock(path: str | Path) -> int:
    """A read-write descriptor of the lock file ``path``, created if missing,
    never through a link."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
                     | os.O_NONBLOCK, output_mode())
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeFile(f"{path} is a symbolic link where the suite keeps its lock: "
                             f"remove it") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeFile(f"{path} is not a regular file where the suite keeps its lock: "
                         f"remove it")
    return fd


def discard_output(fd: int) -> None:
    """Point the descriptor ``fd`` (standard output whose reader quit) at ``/dev/null``."""
    null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    os.dup2(null, fd)
    os.close(null)


def is_regular(path: str | Path) -> bool:
    """True for a regular file that is not a link."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def is_folder(path: str | Path) -> bool:
    """True for a folder that is not a link."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def entries(folder: str | Path, pattern: str = "*") -> list[Path]:
    """The names directly in ``folder`` matching the one-level ``pattern``
    (sorted), links included as themselves: test them with :func:`is_regular`
    / :func:`is_folder`, which never follow one. Nothing when ``folder`` is
    not a folder (or is a link)."""
    if "/" in pattern:
        raise ValueError(f"entries() looks one level down, not {pattern!r}")
    if not is_folder(folder):
        return []
    return sorted(Path(folder).glob(pattern))


def walk(root: str | Path) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk`` of ``root``, never into a linked folder."""
    yield from os.walk(root, followlinks=False)


def make_folder(path: str | Path) -> Path:
    """``path`` and its missing parents as folders; refused (:class:`UnsafeFile`)
    when ``path`` exists as a link (``mkdir`` would accept a link to a folder
    and every write below it would land elsewhere)."""
    path = Path(path)
    if os.path.islink(path):
        raise UnsafeFile(f"{path} is a symbolic link where the suite makes a folder: "
                         f"remove it")
    path.mkdir(parents=True, exist_ok=True)
    return path


def remove_file(path: str | Path) -> None:
    """Remove ``path`` (a link is removed itself, never what it points at)."""
    Path(path).unlink(missing_ok=True)


def remove_tree(path: str | Path) -> bool:
    """Remove the folder ``path`` and all below it; a link (at ``path`` or
    inside) is never followed. False, and nothing removed, when ``path`` is a
    link or not a folder."""
    if not is_folder(path):
        return False
    # fd-based on Linux: a link inside is removed itself, never followed
    shutil.rmtree(path, ignore_errors=True)
    return True


def remove_empty_folder(path: str | Path) -> bool:
    """Remove ``path`` if it is an empty folder (not a link)."""
    if not is_folder(path):
        return False
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


def move(source: str | Path, target: str | Path) -> Path:
    """Rename ``source`` to ``target`` in place of any file there (not a folder);
    the target's folder must not be a link."""
    target = Path(target)
    os.close(_open_folder(target.parent))
    os.replace(source, target)
    return target


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
    when there is something to move); returns their new paths. Neither
    ``target`` nor the ``.replaced/`` folder above it may be a link: the
    outputs would otherwise move out of the folder."""
    paths = [Path(p) for p in paths if os.path.lexists(p)]
    target = Path(target)
    if paths:
        for folder in (target.parent, target):
            if os.path.islink(folder):
                raise UnsafeFile(f"{folder} is a symbolic link where the suite sets earlier "
                                 f"outputs aside: remove it")
        make_folder(target)
    moved = []
    for path in paths:
        path.rename(target / path.name)
        moved.append(target / path.name)
    return moved
