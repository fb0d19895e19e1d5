"""The suite's one door to the file system: every read, write, move, removal
and new folder goes through this module, with one policy.

- **Reading**: regular files only, opened without following a link and without
  blocking (a FIFO would wait for a writer forever), checked on the open
  descriptor, under a size cap (:func:`open_file`: the one read path). Anything
  else is :class:`UnsafeFile`, one line.
- **Writing**: atomically (a unique temporary file in the same folder, fsync,
  rename) into a folder opened without following a link, with the mode ``open()``
  would give (:func:`atomic_write`, :func:`save_with`).
- **Folders** are made, listed and removed without passing through a link.
- **Replacing**: an earlier output is never deleted but moved to
  ``<folder>/.replaced/<time>/`` (:func:`set_aside`), and only what the caller
  says it wrote.
- **A dataset's files** are the one exception to "no links": the user's data
  folder is read and listed through its links (``follow_links=True``), still
  regular files only, never blocking, each read capped
  (:mod:`ablation.data.raw_files`).

Nothing else in the package opens, renames, removes or makes a file or folder;
a structural test holds it to that.
"""
from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

REPLACED_DIR = ".replaced"


def _umask() -> int:
    """The process umask, from /proc where it can be (setting it is not thread-safe)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0)
    os.umask(mask)
    return mask


def output_mode() -> int:
    """The mode every output file gets: 0666 less the umask (0644 under umask 022),
    as ``open()`` would give it; ``mkstemp``'s private 0600 is never kept."""
    return 0o666 & ~_umask()


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


def save_with(path: str | Path, write: Callable[[Path], object]) -> Path:
    """``write(temporary path)`` (Keras's ``save``, Matplotlib's ``savefig``), then
    the result renamed over ``path``: atomic as :func:`atomic_write` is. The
    temporary name is one no other process can pick (``mkstemp``, in a folder that
    is not a link), already given :func:`output_mode`; it is removed if the write fails."""
    path = Path(path)
    os.close(_open_folder(path.parent))
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix or ".tmp",
                                dir=path.parent)
    tmp = Path(name)
    try:
        try:
            os.fchmod(fd, output_mode())
        finally:
            os.close(fd)
        write(tmp)
        if not os.path.isfile(tmp) or os.path.islink(tmp):
            raise UnsafeFile(f"{tmp} was not written as a regular file")
        fsync_path(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
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
    readers that stream (NumPy, PIL, tarfile, hashing). Opened without blocking and
    checked on the descriptor; a link is refused unless ``follow_links``."""
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
            raise NotAFile(f"{shown(path)} is {what_is(info.st_mode)}, not a regular file")
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
        return read_capped(f, limit, shown(path))


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
    os.dup2(null := os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC), fd)
    os.close(null)


def _lstat_is(path: str | Path, test: Callable[[int], bool]) -> bool:
    try:
        return test(os.lstat(path).st_mode)
    except OSError:
        return False


def is_regular(path: str | Path) -> bool:
    """True for a regular file that is not a link."""
    return _lstat_is(path, stat.S_ISREG)


def is_folder(path: str | Path) -> bool:
    """True for a folder that is not a link."""
    return _lstat_is(path, stat.S_ISDIR)


def entries(folder: str | Path, pattern: str = "*", *, hidden: bool = True,
            follow_links: bool = False) -> list[Path]:
    """The names directly in ``folder`` matching the one-level ``pattern`` (sorted),
    links included as themselves; dot names only with ``hidden``. Nothing when
    ``folder`` is not a folder or is a link, unless ``follow_links`` (a user's data
    folder), where a folder that cannot be listed raises its ``OSError``."""
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
    when ``path`` is a link (every write below it would land elsewhere)."""
    path = Path(path)
    if os.path.islink(path):
        raise UnsafeFile(f"{path} is a symbolic link where the suite makes a folder: "
                         f"remove it")
    path.mkdir(parents=True, exist_ok=True)
    return path


def own_file(path: str | Path) -> Path:
    """``path`` for a library that opens a file of the suite's itself (Optuna's
    journal): refused (:class:`UnsafeFile`) when a link or anything but a regular
    file is there. Absent is fine: the library creates it."""
    path = Path(path)
    if os.path.islink(path):
        raise UnsafeFile(f"{shown(path)} is a symbolic link where the suite keeps a file of "
                         f"its own: remove it")
    if os.path.lexists(path) and not stat.S_ISREG(mode := os.lstat(path).st_mode):
        raise NotAFile(f"{shown(path)} is {what_is(mode)}, where the suite keeps a file of "
                       f"its own: remove it")
    return path


def remove_file(path: str | Path) -> None:
    """Remove ``path`` (a link itself, never what it points at)."""
    Path(path).unlink(missing_ok=True)


def remove_tree(path: str | Path) -> bool:
    """Remove the folder ``path`` and all below it, never following a link inside
    (``rmtree`` is fd-based on Linux); False when ``path`` is a link or no folder."""
    if not is_folder(path):
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


def remove_empty_folder(path: str | Path) -> bool:
    """Remove ``path`` if it is an empty folder (not a link)."""
    with contextlib.suppress(OSError):
        return is_folder(path) and os.rmdir(path) is None
    return False


def move(source: str | Path, target: str | Path) -> Path:
    """Rename ``source`` over ``target`` (a file), in a folder that is not a link."""
    target = Path(target)
    os.close(_open_folder(target.parent))
    os.replace(source, target)
    return target


def check_results_dir(results_dir: str) -> Path:
    """``results_dir`` (absolute) as a safe place for a sweep, or :class:`UnsafeFile`
    saying why: empty, the root, not a folder, or not writable are refused."""
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
    what = "cannot be written" if existing == path.absolute() else \
        f"cannot be created ({existing} is not writable)"
    _check_writable(existing, f"results_dir={text} {what}",
                    "; set results_dir=<a writable folder>")
    return path.absolute()  # a results_dir that is itself a link is the user's choice


def _check_writable(folder: Path, what: str, hint: str = "") -> None:
    """A real try, not ``os.access``: root passes that on a read-only file system."""
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as e:
        raise UnsafeFile(f"{what}: {e.strerror or e}{hint}") from None


def check_entries(root: str | Path, folder: str | Path, names=()) -> None:
    """Refuse (:class:`UnsafeFile`) a ``folder`` the suite cannot write into as it
    expects: outside ``root`` or reached through a link, not a folder, not writable;
    or, at one of ``names`` inside it (``name/`` names a folder), a link or an entry
    of another kind than the suite keeps there (a folder where it writes a file)."""
    root, folder = Path(root).absolute(), Path(folder).absolute()
    if not folder.resolve().is_relative_to(root.resolve()):
        raise UnsafeFile(f"{folder} is outside results_dir {root}: refused")
    path = root
    for part in folder.relative_to(root).parts if folder.is_relative_to(root) else ():
        path = path / part
        if path.is_symlink():
            raise UnsafeFile(f"{path} is a symbolic link: the suite writes only inside "
                             f"results_dir and follows no links; remove it")
    for name in ("/", *names):
        path, want = folder / name.strip("/"), "folder" if name.endswith("/") else "file"
        if path.is_symlink():
            raise UnsafeFile(f"{path} is a symbolic link where the suite keeps its own {want}: "
                             f"remove it")
        if os.path.lexists(path) and not (is_folder if want == "folder" else is_regular)(path):
            mode = os.lstat(path).st_mode
            raise UnsafeFile(f"{path} is {'a file' if stat.S_ISREG(mode) else what_is(mode)} "
                             f"where the suite keeps its own {want}: remove it")
    if is_folder(folder):
        _check_writable(folder, f"{folder} cannot be written")


def replaced_folder(folder: str | Path) -> Path:
    """A new ``<folder>/.replaced/<time>/`` path (not created) for outputs set aside now."""
    return Path(folder) / REPLACED_DIR / datetime.now().strftime("%Y%m%d-%H%M%S-%f")


def set_aside(paths: Iterable[str | Path], target: str | Path) -> list[Path]:
    """Move each of ``paths`` that exists into the folder ``target`` (created when
    there is something to move, never a link); returns their new paths."""
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


class NotAFile(UnsafeFile):
    """A path that is not a regular file (a folder, device, FIFO or socket)."""


class TooBig(UnsafeFile):
    """A file or archive member over the size cap of its read."""


def shown(path) -> str:
    """A path as text any log or terminal can take: bytes that are not UTF-8
    (kept by Python as surrogates) are written as ``\\xNN``."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def what_is(mode: int) -> str:
    """``a folder``, ``a FIFO (named pipe)``, ... for a file mode that is not a regular file."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def read_capped(f: BinaryIO, limit: int, what) -> bytes:
    """At most ``limit`` bytes of the open file ``f``, else :class:`TooBig` naming ``what``."""
    data = f.read(limit + 1)
    if len(data) > limit:
        raise TooBig(f"{what} holds over {limit:,} bytes (the cap)")
    return data
