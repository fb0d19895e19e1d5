"""The job folders of the sweeps this process started, by sweep folder.

:class:`ablation.sweep.callbacks.SweepEnd` tallies what each job of *this*
sweep did; the folders are known when the sweep starts (composing every job's
config again would cost time per job), or, in a tuned sweep, as its trials and
final runs are launched (:mod:`hydra_plugins.vit_ablation.tuning`).
"""
from __future__ import annotations

from pathlib import Path

_folders: dict[str, list[Path]] = {}


def remember(sweep_dir, folders: list[Path]) -> None:
    """The job folders of the sweep in ``sweep_dir`` (replacing any earlier list)."""
    _folders[str(sweep_dir)] = list(folders)


def forget(sweep_dir) -> list[Path] | None:
    """The job folders remembered for ``sweep_dir``, then no longer; None if none."""
    return _folders.pop(str(sweep_dir), None)
