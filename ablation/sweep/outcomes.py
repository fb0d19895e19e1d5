"""What each job of one sweep invocation did, and the tally that makes the
sweep's exit code its own.

The job folders cannot tell: another sweep into the same folder may have
written there, or overwritten a failed record with a completed one. So when a
multirun starts (:class:`ablation.sweep.callbacks.SweepStart`), it names a
folder for this invocation, ``<sweep>/.sweeps/<time>-<host>-<pid>-<random>/``,
and passes its path to the jobs in the sweep context
(:mod:`ablation.runtime.sweep_context`; Hydra's launchers hand the environment
to their workers: joblib, submitit, Ray, Slurm). Each job writes one small
file there saying what it did (``completed``, ``skipped``: already completed,
``busy``: another process held it, ``failed``); at the end the sweep reads
them back and removes the folder. One file per job, written atomically: no two
processes ever write the same file. The folder is made by the first job that
reports, so input refused before (or by) a job leaves none behind. A sweep
killed outright (``kill -9``) cannot remove its folder: the next sweep into
that folder, at its start and its end, removes those of this host whose
process is gone (:func:`remove_stale`), never a live one's or another host's.
When the sweep ends, :func:`tally` lists the failed, the unfinished (stopped by
a signal, a time limit or a lost node, under a launcher that runs jobs in other
processes) and the busy jobs (:func:`summary`).
"""
from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shlex
import socket
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from ablation.files import (atomic_write, entries, is_folder, make_folder, read_text,
                            remove_empty_folder, remove_tree)
from ablation.runs.record import RECORD_FILENAME, RecordError, find_records, read_record
from ablation.runtime.sweep_context import current

log = logging.getLogger(__name__)

SWEEPS_DIR = ".sweeps"  # hidden: the reporter does not look inside
OUTCOME_LIMIT = 1 << 20  # one job's outcome file: a line of JSON
STATUSES = ("completed", "skipped", "busy", "failed", "interrupted")


_NAME = re.compile(r"^\d{8}-\d{6}-(?P<host>[A-Za-z0-9._]+)-(?P<pid>\d+)-[0-9a-f]{8}$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, but another user's
        return True
    return True


def remove_stale(sweep_dir: str | Path) -> list[Path]:
    """Remove outcome folders left by killed invocations on this host: those
    whose process no longer exists. Other hosts' (a shared file system) and
    live ones are never touched; a reused pid only keeps a stale one."""
    removed = []
    sweeps = Path(sweep_dir) / SWEEPS_DIR
    for folder in entries(sweeps):
        match = _NAME.match(folder.name)
        if (match and is_folder(folder) and match["host"] == _host()
                and int(match["pid"]) != os.getpid() and not _alive(int(match["pid"]))):
            remove_tree(folder)
            removed.append(folder)
    remove_empty_folder(sweeps)
    return removed


def start(sweep_dir: str | Path) -> Path:
    """Name this invocation's outcome folder (not created yet: the sweep
    context carries it to the jobs); remove those killed invocations left."""
    remove_stale(Path(sweep_dir).resolve())
    return (Path(sweep_dir).resolve() / SWEEPS_DIR
            / f"{datetime.now():%Y%m%d-%H%M%S}-{_host()}-{os.getpid()}-{secrets.token_hex(4)}")


def report(job_folder: str | Path, status: str, detail: str | None = None) -> None:
    """Tell this job's sweep what the job did; nothing outside a multirun."""
    assert status in STATUSES, status
    folder = current().outcomes
    if not folder:  # a single run
        return
    make_folder(folder)
    job_folder = Path(job_folder).resolve()
    text = json.dumps({"folder": str(job_folder), "status": status, "detail": detail})
    atomic_write(Path(folder) / f"{job_folder.name}.json", text, fsync=False)


def collect(folder: str | Path) -> dict[Path, dict]:
    """The outcomes this invocation's jobs reported, by job folder."""
    done = {}
    for path in entries(folder, "*.json"):
        try:
            outcome = json.loads(read_text(path, OUTCOME_LIMIT))
            done[Path(outcome["folder"])] = outcome
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return done


def finish(folder: str | Path) -> None:
    """Remove the invocation's folder, those of killed invocations, and
    ``.sweeps`` once empty."""
    folder = Path(folder)
    remove_tree(folder)
    remove_stale(folder.parent.parent)  # also removes .sweeps once empty


class Tally(NamedTuple):
    """(job folder, one line) of this sweep's jobs that did not complete."""
    failed: list[tuple[Path, str]]
    busy: list[tuple[Path, str]]  # skipped: another process held them
    unfinished: list[tuple[Path, str]]  # stopped before their last epoch; resumable


def tally(sweep_dir, job_folders: list[Path], folder: str | Path | None) -> Tally:
    """This sweep's failed, busy and unfinished jobs, from the outcomes its jobs
    reported in ``folder`` (which is then removed).

    A job that reported nothing (a launcher that did not pass the environment
    on, a worker or node that died) is judged by its record; without an
    outcome folder, every failed record below ``sweep_dir`` counts.
    """
    if not folder:
        return Tally([(p.parent, e) for p, e in failed_runs(sweep_dir)], [], [])
    jobs = [Path(f).resolve() for f in job_folders]
    done = collect(folder)
    finish(folder)
    log.debug("%d of this sweep's %d jobs reported their outcome", len(done), len(jobs))
    result = Tally([], [], [])
    # A job that reported without being in the list counts too, unless it is a tuned
    # sweep's trial: the search counted it against its variant's budget and took it
    # off the list, so a diverged trial never makes the sweep fail (docs/tuning.md).
    others = [f for f in done if f not in jobs and _role(f) != "trial"]
    for job in [*jobs, *others]:
        outcome, shown = done.get(job), shown_path(job)
        status = outcome["status"] if outcome else None
        if status == "failed":
            result.failed.append((shown, outcome.get("detail") or "unknown error"))
        elif status == "busy":
            result.busy.append((shown, outcome.get("detail") or str(shown)))
        elif status == "interrupted":
            result.unfinished.append((shown, _record_line(job) or
                                      f"interrupted by {outcome.get('detail') or 'a signal'}"))
        elif status is None:
            record = _record(job)
            if record is None:
                result.failed.append((shown, "the job left neither an outcome nor a record"))
            elif isinstance(record, str):
                result.failed.append((shown, record))
            elif record.get("status") == "failed":
                result.failed.append((shown, record.get("error") or "unknown error"))
            elif record.get("status") != "completed":
                result.unfinished.append((shown, record.get("error") or
                                          "it ended before its record did"))
    return result


def _record(job: Path) -> dict | str | None:
    """The job's record; None when there is none; a line when it cannot be read."""
    if not (job / RECORD_FILENAME).exists():
        return None
    try:
        return read_record(job / RECORD_FILENAME)
    except RecordError as e:
        return f"unreadable record ({e})"


def _role(job: Path) -> str | None:
    """The role its record gives the job (``trial``, ``final``), or None."""
    record = _record(job)
    return record.get("role") if isinstance(record, dict) else None


def _record_line(job: Path) -> str | None:
    record = _record(job)
    return record.get("error") if isinstance(record, dict) else None


def summary(sweep_dir, failures: list[tuple[Path, str]], busy: list[tuple[Path, str]],
            unfinished: list[tuple[Path, str]] = (), resume: str | None = None) -> list[str]:
    """The lines that end a sweep: the busy jobs (and the report to run once they
    end), the unfinished ones (and ``resume``, the command that resumes them),
    then the failed ones; none when every job ran."""
    lines = []
    if busy:
        lines.append(f"{len(busy)} job(s) skipped: another process was running them:")
        lines += [f"  {detail}" for _, detail in busy]
        folder = shown_path(Path(str(sweep_dir)).resolve())
        report = shlex.join(["python", "-m", "ablation.report", str(folder)])
        lines.append(f"  once it ends, the report with them: {report}")
    if unfinished:
        lines.append(f"{len(unfinished)} run(s) did not finish:")
        lines += [f"  {folder}: {line}" for folder, line in unfinished]
        if resume:
            lines.append(f"  to resume them: {resume}")
    if failures:
        lines.append(f"{len(failures)} run(s) failed:")
        lines += [f"  {folder}: {error}" for folder, error in failures]
    return lines


def shown_path(folder: Path) -> Path:
    """``folder`` as the user named it: relative to the working folder when below it."""
    try:
        return folder.relative_to(Path.cwd().resolve())
    except ValueError:
        return folder


def failed_runs(sweep_dir) -> list[tuple[Path, str]]:
    """(record path, error) of every failed run below ``sweep_dir``."""
    failures = []
    for path in find_records(sweep_dir) if Path(sweep_dir).exists() else []:
        try:
            record = read_record(path)
        except RecordError as e:
            failures.append((path, f"unreadable record ({e})"))
            continue
        if record["status"] == "failed":
            failures.append((path, record.get("error") or "unknown error"))
    return failures
