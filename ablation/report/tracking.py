"""The report as a W&B run (job type ``report``) in the sweep's group."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

log = logging.getLogger(__name__)


def log_report(table: pd.DataFrame, effects: pd.DataFrame, images: list[Path], *,
               settings: Mapping, group: str | None, directory: Path) -> dict | None:
    """Log the comparison (and effects) as ``wandb.Table`` s and the plots as images.

    ``settings`` holds mode, project and entity (the ``wandb`` config group);
    with mode ``disabled`` nothing is imported or written. Returns the run's
    id and folder.
    """
    if settings.get("mode", "offline") == "disabled":
        return None
    import wandb

    from ablation.tracking import open_run

    run = open_run(settings["mode"], Path(directory),
                   project=settings.get("project") or "vit-ablation",
                   entity=settings.get("entity"), group=group, job_type="report",
                   name=f"report-{group}" if group else "report",
                   dir=str(directory), reinit="finish_previous",
                   config={"source": str(directory)}, settings={"quiet": True})
    with run:
        payload = {"comparison": wandb.Table(dataframe=_plain(table))}
        if not effects.empty:
            payload["factorial_effects"] = wandb.Table(dataframe=_plain(effects))
        payload.update({f"plots/{p.stem}": wandb.Image(str(p)) for p in images})
        run.log(payload)
        ok = table[table["status"] == "ok"]
        for _, row in ok.iterrows():
            prefix = f"{row['dataset']}/{row['model']}/{row['variant']}"
            run.summary[f"{prefix}/top1"] = row["top1_mean"]
            run.summary[f"{prefix}/top5"] = row["top5_mean"]
        return {"id": run.id, "dir": str(Path(run.dir).parent)}


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """wandb.Table wants plain Python scalars."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == bool:
            out[col] = out[col].astype(int)
    return out.astype(object).where(out.notna(), None)
