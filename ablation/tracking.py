"""Weights & Biases, one run per job, and nothing at all when disabled.

wandb is imported only when ``wandb.mode`` is not ``disabled``. The run is
opened as a context manager so a job that raises marks its W&B run failed
and finishes it: otherwise the next job in the same Hydra process would get
the same run back from ``wandb.init()`` and its metrics would leak into it.
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path

log = logging.getLogger(__name__)


class Tracker:
    """What training needs from an experiment tracker; this one records nothing."""

    mode = "disabled"

    def log(self, metrics: Mapping, step: int) -> None:
        pass

    def summarize(self, metrics: Mapping) -> None:
        pass

    def info(self) -> dict:
        return {"id": None, "dir": None, "mode": self.mode}


class WandbTracker(Tracker):
    def __init__(self, run, output_dir: Path):
        self.run = run
        self.mode = "offline" if run.offline else "online"
        self.output_dir = Path(output_dir)

    def log(self, metrics: Mapping, step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def summarize(self, metrics: Mapping) -> None:
        self.run.summary.update(dict(metrics))

    def info(self) -> dict:
        run_dir = Path(self.run.dir).parent  # .../wandb/offline-run-<time>-<id>
        try:
            run_dir = run_dir.relative_to(self.output_dir.resolve())
        except ValueError:
            pass
        return {"id": self.run.id, "dir": str(run_dir), "mode": self.mode,
                "project": self.run.project, "group": self.run.group}


@contextlib.contextmanager
def tracked_run(settings: Mapping, *, name: str, config: Mapping, tags: list[str],
                output_dir: str | Path) -> Iterator[Tracker]:
    """Open one W&B run for one training job (or a no-op tracker if disabled).

    ``settings`` is the ``wandb`` config group: mode, project, entity, group, tags.
    The W&B files go under ``output_dir/wandb`` beside the run record.
    """
    if settings["mode"] == "disabled":
        yield Tracker()
        return
    import wandb

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with wandb.init(
        project=settings["project"],
        entity=settings.get("entity"),
        group=settings.get("group"),
        job_type="train",
        name=name,
        tags=list(dict.fromkeys([*tags, *(settings.get("tags") or [])])),
        config=dict(config),
        mode=settings["mode"],
        dir=str(output_dir),
        reinit="finish_previous",
    ) as run:
        yield WandbTracker(run, output_dir)
