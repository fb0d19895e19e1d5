"""Folders this invocation created, so refused input leaves nothing behind.

Hydra creates a job's folder before the job can find that its data cannot be
loaded. Before Hydra creates anything, :func:`missing_folders` names the folders
about to be used that do not exist yet (the list travels in the sweep context, so
launchers' workers see it). A refusing job removes its own folder if listed
(:func:`remove_created`); as workers run jobs side by side, the command's own
process then removes the rest (:func:`remove_all_created`), first waiting for each
job's lock, since a launcher may pass on the first refusal while a sibling job is
still being stopped. Nothing that existed before, or holds a run's output, is removed.
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ablation.files import is_folder, is_regular, remove_tree, walk
from ablation.runs.lock import LOCK_FILE, JobBusy, job_lock
from ablation.runtime.sweep_context import current
# What Hydra writes in a sweep folder on its own; a folder holding only these
# (and empty folders) has nothing of the user's.
HYDRA_BOOKKEEPING = {"multirun.yaml"}
# What a job's folder holds before its job has trained anything.
JOB_BOOKKEEPING = HYDRA_BOOKKEEPING | {"run_sweep.log"}
BOOKKEEPING_DIRS = {".hydra"}
# How long the command waits, in all, for jobs still being stopped to let go of their locks.
LOCK_WAIT_S = 30.0


def missing_folders(folders: Iterable[str | Path]) -> tuple[str, ...]:
    """Which of ``folders`` (and their parents) do not exist now: the sweep
    context's ``new_folders``."""
    missing = set()
    for folder in (Path(os.path.abspath(f)) for f in folders):
        for path in (folder, *folder.parents):
            if path.exists():
                break
            missing.add(str(path))
    return tuple(sorted(missing))


def _noted() -> set[Path]:
    return {Path(p) for p in current().new_folders}


def _files_below(folder: Path) -> list[Path]:
    """Every name below ``folder`` that is not a folder (links and special
    files included), never looking through a link."""
    return [Path(base) / name for base, dirs, names in walk(folder)
            for name in [*names, *(d for d in dirs if not is_folder(Path(base) / d))]]


def _only_bookkeeping(folder: Path) -> bool:
    return all(path.name in HYDRA_BOOKKEEPING and path.parent == folder
               for path in _files_below(folder))


def remove_created(job_folder: str | Path) -> None:
    """Remove ``job_folder`` and its emptied parents if this invocation created them."""
    noted = _noted()
    job_folder = Path(os.path.abspath(job_folder))  # as Hydra's runtime.output_dir is
    if job_folder in noted:
        remove_tree(job_folder)
    for parent in job_folder.parents:
        if parent not in noted or not is_folder(parent) or not _only_bookkeeping(parent):
            break
        remove_tree(parent)


@contextlib.contextmanager
def _lock_let_go(folder: Path, deadline: float) -> Iterator[bool]:
    """Whether no job holds ``folder``'s lock (waiting until ``deadline``, a
    ``time.monotonic()``, for one being stopped); held for the ``with`` block,
    so no job starts there while the folder is judged and removed."""
    with contextlib.ExitStack() as held:
        free = False
        # still held, or not a lock this command can open: not free
        with contextlib.suppress(JobBusy, OSError):
            if is_regular(folder / LOCK_FILE):
                held.enter_context(job_lock(folder, wait_s=max(0.0, deadline - time.monotonic())))
                free = True
        yield free


def _nothing_of_a_run(folder: Path, lock_free: bool = False) -> bool:
    """True if every file below ``folder`` is Hydra's bookkeeping (the job's
    lock too, when ``lock_free``)."""
    for path in _files_below(folder):
        parts = set(path.relative_to(folder).parts[:-1])
        if path.name in JOB_BOOKKEEPING or parts & BOOKKEEPING_DIRS:
            continue
        if lock_free and path == folder / LOCK_FILE:
            continue
        return False
    return True


def remove_all_created() -> None:
    """After a refusal, in the command's own process: remove every folder noted
    as new that holds nothing of a run (only ``.hydra/``, ``run_sweep.log``,
    ``multirun.yaml``, a job lock nobody holds), deepest first."""
    deadline = time.monotonic() + LOCK_WAIT_S  # one wait for all the jobs being stopped
    for folder in sorted(_noted(), key=lambda p: len(p.parts), reverse=True):
        if not is_folder(folder) or not _nothing_of_a_run(folder, lock_free=True):
            continue  # a run's output is there, whoever holds the lock
        with _lock_let_go(folder, deadline) as lock_free:
            if _nothing_of_a_run(folder, lock_free):
                remove_tree(folder)
