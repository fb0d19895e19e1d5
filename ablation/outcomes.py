"""What each job of one sweep invocation did, so the sweep's exit code is its own.

The job folders cannot tell: another sweep into the same folder may have
written there, or overwritten a failed record with a completed one. So when
a multirun starts (:class:`ablation.hydra_callbacks.SweepStart`), it names a
folder for this invocation, ``<sweep>/.sweeps/<time>-<pid>-<random>/``, and
passes its path to the jobs in the environment variable ``OUTCOMES_ENV``
(Hydra's launchers hand the environment to their workers: joblib, submitit,
Ray, Slurm). Each job writes one small file there saying what it did
(``completed``, ``skipped``: already completed, ``busy``: another process held
it, ``failed``); at the end the sweep reads them back and removes the folder.
One file per job, written atomically: no two processes ever write the same
file. The folder is made by the first job that reports, so input refused
before (or by) a job leaves none behind.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
from datetime import datetime
from pathlib import Path

from ablation.records import atomic_write

OUTCOMES_ENV = "VIT_ABLATION_SWEEP_OUTCOMES"
SWEEPS_DIR = ".sweeps"  # hidden: the reporter does not look inside
STATUSES = ("completed", "skipped", "busy", "failed")


def start(sweep_dir: str | Path) -> Path:
    """Name this invocation's outcome folder (not created yet) and export it to the jobs."""
    folder = (Path(sweep_dir).resolve() / SWEEPS_DIR
              / f"{datetime.now():%Y%m%d-%H%M%S}-{os.getpid()}-{secrets.token_hex(4)}")
    os.environ[OUTCOMES_ENV] = str(folder)
    return folder


def report(job_folder: str | Path, status: str, detail: str | None = None) -> None:
    """Tell this job's sweep what the job did; nothing outside a multirun."""
    assert status in STATUSES, status
    folder = os.environ.get(OUTCOMES_ENV)
    if not folder:  # a single run
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    job_folder = Path(job_folder).resolve()
    text = json.dumps({"folder": str(job_folder), "status": status, "detail": detail})
    atomic_write(Path(folder) / f"{job_folder.name}.json", text, fsync=False)


def collect(folder: str | Path) -> dict[Path, dict]:
    """The outcomes this invocation's jobs reported, by job folder."""
    done = {}
    for path in Path(folder).glob("*.json"):
        try:
            outcome = json.loads(path.read_text())
            done[Path(outcome["folder"])] = outcome
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return done


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
