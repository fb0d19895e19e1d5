"""What each job of one sweep invocation did, so the sweep's exit code is its own.

The job folders cannot tell: another sweep into the same folder may have
written there, or overwritten a failed record with a completed one. So when
a multirun starts (:class:`ablation.hydra_callbacks.SweepStart`), it makes a
folder for this invocation, ``<sweep>/.sweeps/<time>-<pid>-<random>/``, and
passes its path to the jobs in the environment variable ``OUTCOMES_ENV``
(Hydra's launchers hand the environment to their workers: joblib, submitit,
Ray, Slurm). Each job writes one small file there saying what it did
(``completed``, ``skipped``: already completed, ``busy``: another process held
it, ``failed``); at the end the sweep reads them back and removes the folder.
One file per job, written atomically: no two processes ever write the same file.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import datetime
from pathlib import Path

OUTCOMES_ENV = "VIT_ABLATION_SWEEP_OUTCOMES"
SWEEPS_DIR = ".sweeps"  # hidden: the reporter does not look inside
JOBS_FILE = "jobs.json"
STATUSES = ("completed", "skipped", "busy", "failed")


def start(sweep_dir: str | Path, job_folders: list[Path]) -> Path:
    """Make this invocation's outcome folder, list the jobs it will run, and
    export its path to the jobs."""
    parent = Path(sweep_dir).resolve() / SWEEPS_DIR
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(
        prefix=f"{datetime.now():%Y%m%d-%H%M%S}-{os.getpid()}-", dir=parent))
    (folder / JOBS_FILE).write_text(json.dumps([str(Path(f).resolve()) for f in job_folders]))
    os.environ[OUTCOMES_ENV] = str(folder)
    return folder


def report(job_folder: str | Path, status: str, detail: str | None = None) -> None:
    """Tell this job's sweep what the job did; nothing outside a multirun."""
    assert status in STATUSES, status
    folder = os.environ.get(OUTCOMES_ENV)
    if not folder or not Path(folder).is_dir():  # a single run, or a finished sweep's folder
        return
    job_folder = Path(job_folder).resolve()
    text = json.dumps({"folder": str(job_folder), "status": status, "detail": detail})
    fd, tmp = tempfile.mkstemp(prefix=".outcome.", dir=folder)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, Path(folder) / f"{job_folder.name}.json")


def collect(folder: str | Path) -> tuple[list[Path], dict[Path, dict]]:
    """The invocation's job folders and the outcomes its jobs reported, by folder."""
    folder = Path(folder)
    try:
        jobs = [Path(p) for p in json.loads((folder / JOBS_FILE).read_text())]
    except (OSError, ValueError):
        jobs = []
    done = {}
    for path in folder.glob("*.json"):
        if path.name == JOBS_FILE:
            continue
        try:
            outcome = json.loads(path.read_text())
            done[Path(outcome["folder"])] = outcome
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return jobs, done


def finish(folder: str | Path) -> None:
    """Remove the invocation's folder (and ``.sweeps`` once empty)."""
    folder = Path(folder)
    shutil.rmtree(folder, ignore_errors=True)
    try:
        folder.parent.rmdir()
    except OSError:
        pass
    if os.environ.get(OUTCOMES_ENV) == str(folder):
        del os.environ[OUTCOMES_ENV]
