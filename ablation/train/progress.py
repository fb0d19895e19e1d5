"""One progress line per epoch when the output is not a terminal, without Keras
(the callback that prints it is :class:`ablation.train.fit.ProgressLine`):

    [2/8] spt+lsa+temp-s0 epoch 13/50 · loss 2.314 · val top-1 41.2 % · 38s · sweep 27 % · ETA 1h52m
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

from ablation.runs.epochs import start_up_seconds, steady_seconds


def prints_lines(verbose) -> bool:
    """Whether ``trainer.verbose`` asks for these lines: ``auto`` off a terminal."""
    return verbose == "auto" and not sys.stdout.isatty()


def format_duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``48m``, ``1h52m``, ``2d03h``."""
    s = max(int(round(seconds)), 0)
    if s < 60:
        return f"{s}s"
    if s < 600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 3600:
        return f"{round(s / 60)}m"
    if s < 48 * 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def eta_seconds(epoch_seconds: Sequence[float], epochs_left_in_job: int,
                later_epochs: int = 0, later_jobs: int = 0) -> float:
    """Seconds until the sweep ends, from this job's epochs so far: each epoch costs
    the steady epochs' median, each later job the first epoch's excess once more
    (:mod:`ablation.runs.epochs`)."""
    if not epoch_seconds:
        raise ValueError("no epoch has been timed yet")
    steady = steady_seconds(epoch_seconds) or epoch_seconds[0]
    start_up = start_up_seconds(epoch_seconds) or 0.0
    return (epochs_left_in_job + later_epochs) * steady + later_jobs * start_up


def progress_line(run_name: str, epoch: int, epochs: int, epoch_seconds: Sequence[float],
                  metrics: dict | None = None, position: tuple[int, list[int]] | None = None,
                  validation_name: str = "val") -> str:
    """The line for the end of ``epoch`` (counted from 1) of ``epochs``;
    ``epoch_seconds``: this attempt's so far; ``position``: (job index, every job's
    epochs) from :mod:`ablation.runtime.sweep_context`, else the line is the job's alone."""
    metrics = metrics or {}
    parts = [f"epoch {epoch}/{epochs}"]
    if "loss" in metrics:
        parts.append(f"loss {metrics['loss']:.4g}")
    if "val_top1" in metrics:
        parts.append(f"{validation_name} top-1 {100 * metrics['val_top1']:.1f} %")
    parts.append(format_duration(epoch_seconds[-1]))
    head, later_epochs, later_jobs = run_name, 0, 0
    if position is not None:
        num, all_epochs = position
        head = f"[{num + 1}/{len(all_epochs)}] {run_name}"
        done = sum(all_epochs[:num]) + epoch
        parts.append(f"sweep {100 * done / max(sum(all_epochs), 1):.0f} %")
        later_epochs, later_jobs = sum(all_epochs[num + 1:]), len(all_epochs) - num - 1
    eta = eta_seconds(epoch_seconds, epochs - epoch, later_epochs, later_jobs)
    parts.append(f"ETA {format_duration(eta)}")
    return f"{head} " + " · ".join(parts)
