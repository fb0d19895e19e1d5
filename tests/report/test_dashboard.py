"""The sweep's W&B workspace as code, tested offline: the definition goes back through
wandb-workspaces' own models, and every key it names exists in the sweep's runs as
``wandb leet inspect`` reads them back. (Rendering needs a W&B server: untested here.)"""
import json
import subprocess
import sys

import pytest

from tests.helpers.paths import ROOT
from tests.helpers.wandb_runs import wandb_inspect

pytest.importorskip("wandb_workspaces")


def load_definition(data):
    """A definition read back through the library's own models, as a ``Workspace``."""
    import wandb_workspaces.workspaces as ws
    from wandb_workspaces.workspaces import internal

    return ws.Workspace._from_model(internal.View.model_validate(dict(data)))


def referenced_keys(workspace) -> dict[str, set[str]]:
    """Config keys, summary keys and history keys that the workspace's panels name."""
    import wandb_workspaces.reports.v2 as wr

    out = {"config": set(), "summary": set(), "history": set(), "table": set()}
    name = lambda m: getattr(m, "name", m)  # noqa: E731 - a key or wr.Metric/Config
    for group in workspace.runset_settings.groupby:
        out["config"].add(group.name)
    for section in workspace.sections:
        for panel in section.panels:
            if isinstance(panel, wr.BarPlot):
                out["summary"].update(map(name, panel.metrics))
            elif isinstance(panel, wr.LinePlot):
                out["history"].update(map(name, [panel.x, *panel.y]))
            elif isinstance(panel, wr.ParallelCoordinatesPlot):
                for column in panel.columns:
                    kind = "config" if isinstance(column.metric, wr.Config) else "summary"
                    out[kind].add(name(column.metric))
            elif isinstance(panel, wr.WeavePanelSummaryTable):
                out["table"].add(panel.table_name)
            if getattr(panel, "groupby", None) is not None:
                out["config"].add(name(panel.groupby))
    return out


@pytest.mark.slow
def test_dashboard_definition_matches_the_sweeps_runs(smoke_sweep, tmp_path, wandb_cli):
    from ablation.report.dashboard import DEFINITION_FILE

    sweep = smoke_sweep.root / "smoke"
    result = subprocess.run([sys.executable, "-m", "ablation.report", str(sweep), "--out",
                             str(tmp_path), "--no-plots", "--wandb-dashboard"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"W&B dashboard definition written to {tmp_path / DEFINITION_FILE}" in result.stdout
    payload = json.loads((tmp_path / DEFINITION_FILE).read_text())
    assert "--wandb-dashboard --wandb-mode online" in payload["publish"]
    workspace = load_definition(payload["view"])              # the library's own models
    names = [s.name for s in workspace.sections]
    assert names == ["Test accuracy by variant (mean ± sd over seeds)",
                     "Validation top-1 per epoch", "Learned temperature per block",
                     "Locality per layer", "Switches against test top-1",
                     "Comparison table (the report run)"]
    assert workspace.runset_settings.filters == 'Metric("Group") == \'smoke\''  # the sweep
    pc = workspace.sections[4].panels[0]
    assert [c.metric.name for c in pc.columns] == ["spt", "lsa", "learnable_temperature",
                                                   "test/top1"]

    keys = referenced_keys(workspace)
    train = [wandb_inspect(wandb_cli, d) for d in sweep.glob("*/wandb/offline-run-*")]
    (report_dir,) = sweep.glob("wandb/offline-run-*")
    report = wandb_inspect(wandb_cli, report_dir)
    assert len(train) == 4
    for seen in train:
        history = {k for h in seen["history_records"] for k in h["history"]["item"]}
        assert keys["config"] <= set(seen["config"]), keys["config"] - set(seen["config"])
        assert keys["summary"] <= set(seen["summary"])
        # temperature panels name keys only the runs that learn a temperature have
        temperature = {k for k in keys["history"] if k.startswith("temperature/")}
        assert keys["history"] - temperature <= history, keys["history"] - history
        assert (temperature <= history) is seen["config"]["learnable_temperature"]
    assert {"temperature/block_0", "temperature/block_1", "epoch", "val/top1"} <= keys["history"]
    assert any(k.startswith("locality/block_1/") for k in keys["history"])
    assert keys["table"] == {"comparison"} and "comparison" in report["summary"]


def test_dashboard_of_hand_made_records_names_their_keys(tmp_path):
    from ablation.report import load_runs
    from ablation.report.dashboard import build, definition
    from tests.helpers.records import record

    for spt in (False, True):
        record(tmp_path, spt, True, True, 0, 0.5)
    runs = load_runs(tmp_path)
    workspace = load_definition(definition(build(runs, project="p", entity=None, group="g")))
    keys = referenced_keys(workspace)
    assert keys["history"] == {"epoch", "val/top1", "temperature/block_0"}
    assert keys["summary"] == {"test/top1", "test/top5"}
    assert keys["config"] == {"variant", "spt", "lsa", "learnable_temperature"}
