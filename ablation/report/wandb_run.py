"""The report as a W&B run (job type ``report``) in the sweep's group.

One report run per group and output folder (its id derived from both): making the
report again continues it (online, ``resume="allow"``; offline, the earlier run's
folder is set aside under ``<out>/.replaced/``).
"""
from __future__ import annotations

import hashlib
import logging
import shlex
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ablation.runs.tracking import (console_settings, open_run, set_aside_offline_runs,
                                    wandb_folders, where)

log = logging.getLogger(__name__)

# the summary's stand-in for the setting of a dataset x model x protocol that is one
# block (its setting label is empty); a real label is never a bare "-"
NO_SETTING = "-"


def log_report(table: pd.DataFrame, effects: pd.DataFrame, images: list[Path], *,
               settings: Mapping, group: str | None, directory: Path, replaced: Path) -> dict:
    """Log the comparison (and effects) as ``wandb.Table`` s and the plots as images
    (``settings``: mode, project, entity); an earlier offline report run is set aside
    into ``replaced/wandb``. Returns the run's id and folder."""
    directory = Path(directory)
    run_id = report_run_id(group, directory)
    set_aside_offline_runs(directory / "wandb", run_id, replaced / "wandb")
    with wandb_folders(directory / "wandb"):
        run = open_run(settings["mode"], directory,
                       project=settings.get("project") or "vit-ablation",
                       entity=settings.get("entity"), group=group, job_type="report",
                       name=f"report-{group}" if group else "report",
                       id=run_id, resume="allow", dir=str(directory), reinit="finish_previous",
                       # a variant of its own: a view grouped by variant gains no empty group
                       config={"source": str(directory), "variant": "report"},
                       settings=console_settings(settings))
        return _log(run, table, effects, images, directory)


def _log(run, table, effects, images, directory: Path) -> dict:
    """The tables, plots and per-variant summaries into the report's W&B ``run``."""
    import wandb

    with run:
        payload = {"comparison": wandb.Table(dataframe=_plain(table))}
        if not effects.empty:
            payload["factorial_effects"] = wandb.Table(dataframe=_plain(effects))
        payload.update({f"plots/{p.stem}": wandb.Image(str(p)) for p in images})
        run.log(payload)
        ok = table[table["status"] == "ok"]
        for _, row in ok.iterrows():
            for metric in ("top1", "top5"):
                run.summary[summary_key(row, metric)] = row[f"{metric}_mean"]
    if run.offline:  # one line: the sweep's sync command covers this run too
        log.info("W&B offline report run %s in %s; upload it with the sweep's runs: %s",
                 run.id, Path(run.dir).parent, sync_command(directory))
    else:
        log.info("%s", where(run))
    return {"id": run.id, "dir": str(Path(run.dir).parent), "offline": bool(run.offline),
            "sync": sync_command(directory) if run.offline else None}


def summary_key(row: Mapping, metric: str) -> str:
    """``<dataset>/<model>/<protocol>/<setting>/<variant>/<metric>``: a comparison row's
    summary key, each part's ``/`` (and ``%``) escaped so it cannot pass for two."""
    setting = row.get("setting")
    setting = str(setting) if isinstance(setting, str) and setting else NO_SETTING
    parts = [row["dataset"], row["model"], row["protocol"], setting, row["variant"]]
    return "/".join(str(p).replace("%", "%25").replace("/", "%2F") for p in parts) + f"/{metric}"


def sync_command(folder: Path) -> str:
    """``wandb sync`` for a sweep folder's offline runs, the jobs' and the report's;
    the folder shell-quoted, the patterns after it not."""
    quoted = shlex.quote(str(folder))
    return f"wandb sync {quoted}/wandb/offline-run-* {quoted}/*/wandb/offline-run-*"


def report_run_id(group: str | None, directory: Path) -> str:
    """The report run's id: the same for every report of one group into one output
    folder (sweeps in two results folders may share a group), valid whatever the
    group's name holds."""
    key = f"group:{group}\nfolder:{Path(directory).resolve()}"
    return "report-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """wandb.Table wants plain Python scalars."""
    out = frame.astype({col: int for col in frame.select_dtypes(bool).columns})
    return out.astype(object).where(out.notna(), None)
