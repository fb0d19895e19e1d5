"""The sweep's W&B workspace (a saved view), built as code with ``wandb-workspaces``
(an optional extra): the runs of the sweep's group grouped by variant, accuracy,
per-epoch curves, temperatures, locality, switches against top-1 and the report
run's table. Online it is saved; offline (or when saving fails) its definition is
written to :data:`DEFINITION_FILE` next to the report.
"""
from __future__ import annotations

import json
import logging
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ablation.config import SWITCHES

log = logging.getLogger(__name__)

DEFINITION_FILE = "wandb_dashboard.json"
DEFAULT_PROJECT = "vit-ablation"
_TEMPERATURE = re.compile(r"^temperature/block_(\d+)$")
_LOCALITY = re.compile(r"^locality/block_(\d+)/(mean_distance_px|normalized_entropy)$")
LOCALITY_NAMES = {"mean_distance_px": "mean attention distance (px)",
                  "normalized_entropy": "normalised attention entropy"}


class DashboardError(RuntimeError):
    """The dashboard cannot be built; the message says why in one line."""


def _libraries():
    try:
        import wandb_workspaces.reports.v2 as wr
        import wandb_workspaces.workspaces as ws
    except ImportError:
        raise DashboardError("the W&B dashboard needs wandb-workspaces: "
                             "pip install \"vit-ablation[dashboard]\"") from None
    return ws, wr


def _by_block(keys: set[str], pattern: re.Pattern) -> list[str]:
    return sorted((k for k in keys if pattern.match(k)),
                  key=lambda k: (int(pattern.match(k).group(1)), k))


def build(runs: pd.DataFrame, *, project: str, entity: str | None, group: str | None):
    """The workspace (a ``wandb_workspaces.workspaces.Workspace``) for these runs."""
    ws, wr = _libraries()
    done = runs[runs["status"] == "completed"]
    keys = {k for history in done["history"] for row in history for k in row}
    curve = "val/top1" if "val/top1" in keys or "test/top1" not in keys else "test/top1"
    by_variant = {"groupby": wr.Config("variant"), "groupby_aggfunc": "mean",
                  "groupby_rangefunc": "stddev"}

    def line(title, metric, y_title):
        return wr.LinePlot(title=title, x="epoch", y=[metric], title_x="epoch",
                           title_y=y_title, **by_variant)

    sections = [
        ws.Section(name="Test accuracy by variant (mean ± sd over seeds)", is_open=True, panels=[
            wr.BarPlot(title=f"test {m[-4:]} by variant", metrics=[m], **by_variant)
            for m in ("test/top1", "test/top5")]),
        ws.Section(name="Validation top-1 per epoch" if curve == "val/top1"
                   else "Test top-1 per epoch (official protocol)", is_open=True,
                   panels=[line(f"{curve} by variant", curve, curve)]),
        ws.Section(name="Switches against test top-1", is_open=True, panels=[
            wr.ParallelCoordinatesPlot(title=f"{', '.join(SWITCHES)} -> test top-1",
                                       columns=[wr.ParallelCoordinatesPlotColumn(
                                           metric=wr.Config(s)) for s in SWITCHES]
                                       + [wr.ParallelCoordinatesPlotColumn(
                                           metric=wr.SummaryMetric("test/top1"))])]),
        ws.Section(name="Comparison table (the report run)", is_open=True,
                   panels=[wr.WeavePanelSummaryTable(table_name="comparison")]),
    ]
    searched = sorted({key for entry in runs.get("tuning", pd.Series(dtype=object))
                       if isinstance(entry, dict) for key in entry["params"]})
    if searched:  # a tuned sweep: its trials (job type "trial") share the group
        sections.insert(2, ws.Section(name="Tuning trials (job type trial)", is_open=True, panels=[
            wr.ScatterPlot(title=f"trials: final validation top-1 against {key}",
                           x=wr.Config(key), y=wr.SummaryMetric("final_val/top1"), log_x=True)
            for key in searched]))
    temperatures = _by_block(keys, _TEMPERATURE)
    if temperatures:
        sections.insert(2, ws.Section(name="Learned temperature per block", is_open=True, panels=[
            line(k.replace("/", " "), k, "temperature T") for k in temperatures]))
    locality = _by_block(keys, _LOCALITY)
    if locality:
        sections.insert(-2, ws.Section(name="Locality per layer", panels=[
            line(k.split("/")[1].replace("_", " ") + ": "
                 + LOCALITY_NAMES[_LOCALITY.match(k).group(2)], k,
                 LOCALITY_NAMES[_LOCALITY.match(k).group(2)]) for k in locality]))
    return ws.Workspace(
        entity=entity or "", project=project, name=f"vit-ablation: {group or 'all runs'}",
        runset_settings=ws.RunsetSettings(
            filters=[ws.Metric("Group") == group] if group else [],
            groupby=[ws.Config("variant")]),
        sections=sections)


def definition(workspace) -> dict:
    """The view as the library's own ``View`` model (what W&B stores), as JSON data."""
    return workspace._to_model().model_dump(by_alias=True, exclude_none=True, mode="json")


def publish_command(sweep: Path, project: str, entity: str | None) -> str:
    """The command that saves the view online, shell-quoted to paste as it is."""
    return shlex.join(["python", "-m", "ablation.report", str(sweep), "--wandb-dashboard",
                       "--wandb-mode", "online", "--project", str(project),
                       *(["--entity", str(entity)] if entity else [])])


def make_dashboard(runs: pd.DataFrame, out: Path, settings: Mapping, group: str | None,
                   sweep: Path) -> str:
    """Save the view (online) or write its definition (offline); one line saying which."""
    project = settings.get("project") or DEFAULT_PROJECT
    entity = settings.get("entity")
    workspace = build(runs, project=project, entity=entity, group=group)
    if settings.get("mode") == "online":
        try:
            if not entity:
                import wandb

                workspace.entity = wandb.Api().default_entity or ""
            workspace.save()
            return f"W&B dashboard saved: {workspace.url}"
        except Exception as e:  # noqa: BLE001 - no network, no credentials, server errors
            log.warning("W&B dashboard not saved (%s: %s); its definition is written instead",
                        type(e).__name__, " ".join(str(e).split())[:200])
    path = Path(out) / DEFINITION_FILE
    payload = {"what": "a wandb-workspaces View: the sweep's W&B workspace",
               "publish": publish_command(sweep, project, entity),
               "view": definition(workspace)}
    from ablation.report.generation import add_to_generation
    from ablation.report.load import ReportError

    try:  # one more file of the report's generation: the next report replaces it
        add_to_generation(Path(out), DEFINITION_FILE, json.dumps(payload, indent=1) + "\n")
    except ReportError as e:
        raise DashboardError(str(e)) from None
    return (f"W&B dashboard definition written to {path}; publish it (after wandb sync) "
            f"with: {payload['publish']}")
