"""An exclusive lock on a job folder while its job runs, held by the OS.

Two sweeps started into the same folder would otherwise train every job twice.
The lock is ``fcntl.flock`` on ``<job>/.lock``: the kernel drops it when the
process ends, however it ends (SIGKILL included), so a rerun after a kill needs
no stale-lock step; on Linux, ``flock`` on NFS is passed to the server as a POSIX
lock, so jobs on several nodes see each other's. The holder writes its host, pid
and start time into the file. The file is never removed or replaced while a job
may use it: a lock on a file another process has just unlinked would lock nothing.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from ablation.files import make_folder, open_lock, read_bytes

LOCK_FILE = ".lock"
REPORT_LOCK_FILE = ".report.lock"  # the report step of a sweep folder (see report.write)
_POLL_S = 0.1  # how often a waiting process tries the lock again


class JobBusy(RuntimeError):
    """Another process holds the job folder's lock: this one must not run the job."""

    def __init__(self, folder: Path, holder: dict):
        self.folder, self.holder = Path(folder), holder
        who = (f"host {holder.get('host', '?')}, pid {holder.get('pid', '?')}, "
               f"since {holder.get('since', '?')}") if holder else "holder unknown"
        super().__init__(f"{shown_path(self.folder)} is being run by another process "
                         f"({who}): skipped")


def shown_path(folder: Path) -> Path:
    """``folder`` as the user named it: relative to the working folder when below it."""
    resolved, here = folder.resolve(), Path.cwd().resolve()
    return resolved.relative_to(here) if resolved.is_relative_to(here) else folder


def holder(folder: str | Path, name: str = LOCK_FILE) -> dict:
    """Who last took the lock of ``folder`` (``{}`` if nobody has written it yet)."""
    try:
        return json.loads(read_bytes(Path(folder) / name, 4096) or b"{}")
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def job_lock(folder: str | Path, *, name: str = LOCK_FILE,
             wait_s: float = 0.0) -> Iterator[dict]:
    """Hold ``folder``'s lock for the ``with`` block, waiting up to ``wait_s``, or
    raise :class:`JobBusy`. ``name``: the lock file (one folder can have several).
    Yields what was written into it (host, pid, since)."""
    folder = make_folder(folder)
    # a link planted at the lock's name is never followed (nor truncated), a FIFO never waited on
    fd = open_lock(folder / name)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise JobBusy(folder, holder(folder, name)) from None
                time.sleep(_POLL_S)
        me = {"host": platform.node(), "pid": os.getpid(),
              "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        yield me
    finally:
        os.close(fd)  # releases the lock
