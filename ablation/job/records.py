"""What a job's record says before and after training: the run it is
(:func:`base_record`), and how it failed or was interrupted (:func:`failed`)."""
from __future__ import annotations

import math
import traceback
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from omegaconf import OmegaConf

from ablation.config import switches, variant_name
from ablation.config.tuning import role, tuning_entry
from ablation.runs.record import write_record
from ablation.runs.record_schema import SCHEMA_VERSION
from ablation.runtime.provenance import environment
from ablation.runtime.signals import stop_name
from ablation.train.epoch_metrics import EpochMetrics

def base_record(config: Mapping) -> dict:
    """What a run is, before it has measured anything."""
    flags = switches(config)
    return {
        "schema": SCHEMA_VERSION,
        "status": "running",
        "run_name": config["run_name"],
        "variant": variant_name(flags),
        "switches": flags,
        "dataset": config["dataset"]["name"],
        "model": config["model"]["name"],
        "seed": int(config["seed"]),
        "role": role(config),            # trial: a tuned sweep's search job (docs/tuning.md)
        "tuning": tuning_entry(config),  # the search a trial or a tuned final run belongs to
        "metrics": {},
        "history": [],
        "params": None,
        "epochs_completed": 0,
        "resumed_from_epoch": None,
        "diagnostics": None,
        "model_file": None,
        "resumed_from_epochs": [],
        "train_seconds": None,
        "train_images_per_s": None,
        "wandb": {"id": None, "dir": None, "mode": config["wandb"]["mode"]},
        "environment": environment(),
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "finished_at": None,
        "config": dict(config),
        "error": None,
    }


def failed(record: dict, error: BaseException, progress: EpochMetrics | None = None,
           resume_epoch: int | None = None) -> dict:
    """Mark ``record`` failed with ``error``, keeping the epochs done before it.

    ``epochs_completed`` and ``history`` count the epochs whose loss was
    finite (those a rerun resumes from), not the one that diverged. A stop
    (a signal, Ctrl-C) is ``interrupted``, not failed: its message says which
    epoch the rerun resumes from (``resume_epoch``, the last checkpoint's).
    """
    kept = []
    for row in (progress.history if progress else []):
        if not math.isfinite(row.get("train/loss", math.nan)):
            break
        kept.append(row)
    resumed = progress.resumed_from_epochs if progress else []
    status, message = "failed", f"{type(error).__name__}: {error}"
    if isinstance(error, KeyboardInterrupt):
        status = "interrupted"
        done = max(len(kept), resume_epoch or 0)  # its history may not be restored yet
        if resume_epoch:
            message = (f"interrupted by {stop_name(error)} after epoch {done}; rerun the "
                       f"same command to resume from epoch {resume_epoch}")
        elif kept:  # stopped before the first checkpoint was written
            message = (f"interrupted by {stop_name(error)} after epoch {done}, before its "
                       f"first checkpoint; rerun the same command to start it again")
        else:
            message = (f"interrupted by {stop_name(error)} before its first epoch ended; "
                       f"rerun the same command to start it")
    record.update(status=status, error=message,
                  traceback="".join(traceback.format_exception(error)),
                  history=kept, epochs_completed=len(kept),
                  resumed_from_epochs=resumed, resumed_from_epoch=resumed[-1] if resumed else None,
                  finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return record


def write_failure(cfg, output_dir: str | Path, error: BaseException) -> None:
    """A ``failed`` record for a job (``cfg``: its Hydra config) that failed before
    writing its own."""
    config = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    write_record(output_dir, failed(base_record(config), error))


def run_tags(config: Mapping) -> list[str]:
    flags = switches(config)
    return [variant_name(flags), *(f"{k}={'on' if v else 'off'}" for k, v in flags.items()),
            config["dataset"]["name"], config["model"]["name"],
            *(["tuned", role(config)] if config["tune"] is not None else [])]


