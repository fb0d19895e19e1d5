"""The suite's one door to the file system: every read, write, move, removal
and new folder goes through this module, with one policy.

- **Reading**: only regular files, opened without following a link and
  without blocking (a FIFO would wait for a writer forever), with a size cap
  (:func:`open_file`, :func:`read_bytes`, :func:`read_text`: one read path).
  A link, a FIFO, a socket or a device is :class:`UnsafeFile`, one line.
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
- **A dataset's files** are the one exception to "no links": the user's data
  folder is read and listed through its links (``follow_links=True``), still
  only regular files, never blocking, each read under a cap.

It is one module, over 400 lines, because it is the one door: its
policy is read, and kept, in one place.

Nothing else in the package opens, renames, removes or makes a file or
folder; a structural test holds it to that.
"""
from __future__ import annotations

import contextlib
import errno
import fnmatch
import gzip
import hashlib
import os
import secrets
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

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


def open_file(path: str | Path, limit: int, *, follow_links: bool = False) -> BinaryIO:
    """``path`` opened for binary reading, if it is a regular file of at most
    ``limit`` bytes (else :class:`NotAFile` / :class:`TooBig`): a file object, for
    readers that stream (NumPy, PIL, tarfile, hashing).

    Opened without blocking (a FIFO would otherwise wait for a writer forever) and
    checked on the open descriptor, so it cannot be swapped between the check and
    the read. The suite's own files are opened without following a link
    (``O_NOFOLLOW``: a link is refused); a user's data may be linked
    (``follow_links=True``)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(path, flags if follow_links else flags | os.O_NOFOLLOW)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow_links:
            raise UnsafeFile(f"{shown(path)} is a symbolic link: not followed") from None
        raise
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


def read_bytes(path: str | Path, limit: int, *, follow_links: bool = False) -> bytes:
    """The bytes of ``path``, opened as :func:`open_file` opens it; at most ``limit``
    of them (a file that grows while it is read stops there)."""
    with open_file(path, limit, follow_links=follow_links) as f:
        return _capped(f, limit, shown(path))


def read_text(path: str | Path, limit: int, errors: str = "strict") -> str:
    """:func:`read_bytes` decoded as UTF-8."""
    return read_bytes(path, limit).decode("utf-8", errors=errors)


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


def entries(folder: str | Path, pattern: str = "*", *, hidden: bool = True,
            follow_links: bool = False) -> list[Path]:
    """The names directly in ``folder`` matching the one-level ``pattern``
    (sorted), links included as themselves: test them with :func:`is_regular`
    / :func:`is_folder`, which never follow one; names starting with a dot only
    with ``hidden``. The suite's own folders are not listed through a link:
    nothing when ``folder`` is not a folder (or is a link). A user's data folder
    may be a link (``follow_links=True``); then a folder that cannot be listed
    raises its ``OSError``."""
    if "/" in pattern:
        raise ValueError(f"entries() looks one level down, not {pattern!r}")
    if not follow_links and not is_folder(folder):
        return []
    names = fnmatch.filter(os.listdir(folder), pattern)
    return sorted(Path(folder) / n for n in names if hidden or not n.startswith("."))


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


def own_file(path: str | Path) -> Path:
    """``path`` for a library that opens and appends to a file of the suite's
    itself (Optuna's journal): refused (:class:`UnsafeFile`) when a link or
    anything but a regular file is there, so no write lands elsewhere and no
    open blocks. Absent is fine: the library creates it."""
    path = Path(path)
    if os.path.islink(path):
        raise UnsafeFile(f"{shown(path)} is a symbolic link where the suite keeps a file of "
                         f"its own: remove it")
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        raise NotAFile(f"{shown(path)} is {describe(path)}, where the suite keeps a file of "
                       f"its own: remove it")
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
        if os.path.lexists(folder / name) and not (is_regular(folder / name)
                                                   or is_folder(folder / name)):
            raise UnsafeFile(f"{folder / name} is a FIFO, socket or device where the suite "
                             f"writes its own file: remove it")


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


# --- Reading a dataset: the user's folder, links followed ----------------------
#
# A data folder is the user's, and anything can lie in it. Each read below
# opens a *regular* file only: the open never blocks (a FIFO planted under an
# image's name opens at once and is then refused), and the opened file, not the
# name, is checked, so a name swapped between a listing and the open is caught.
# Devices (``/dev/zero``), FIFOs and sockets are refused in one line naming what
# they are, and every read stops at a size cap. Symbolic links are followed for
# reading: a data folder whose class folders or files are links reads what they
# point at, and the data fingerprint hashes exactly that, walking the same
# listing (:func:`kind`, :func:`ablation.data.images.image_folder_files`).

# What one read may take: any data file streamed (hashed, or an archive read
# member by member), and what is read whole into memory (a pickled batch, an
# IDX file; the largest official one, CIFAR-100's train batch, is 155 MB).
MAX_FILE_BYTES = 8 << 30
MAX_READ_BYTES = 1 << 30


class NotAFile(UnsafeFile):
    """A path that is not a regular file (a folder, device, FIFO or socket)."""


class TooBig(UnsafeFile):
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


def _capped(f: BinaryIO, limit: int, what) -> bytes:
    data = f.read(limit + 1)
    if len(data) > limit:
        raise TooBig(f"{what} holds over {limit:,} bytes (the cap)")
    return data


def read_gzip(path: Path, limit: int = MAX_READ_BYTES) -> bytes:
    """The decompressed bytes of one gzip file, at most ``limit`` of them
    (a small file that unpacks to gigabytes stops there)."""
    with open_file(path, MAX_FILE_BYTES, follow_links=True) as raw, \
            gzip.GzipFile(fileobj=raw, mode="rb") as f:
        return _capped(f, limit, f"{shown(path)} (decompressed)")


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
            found[name] = _capped(f, limit, name)
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
