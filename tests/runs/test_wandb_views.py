"""W&B as researchers use it: runs grouped by ``variant``, epoch as the x axis, one
console line per run, and the documented sync command reaching every run."""
import glob
import json
import logging
import re
import subprocess

import pytest

from ablation.config.switches import variant_label
from ablation.runs.record import find_records, read_record
from tests.helpers.paths import ROOT
from tests.helpers.wandb_runs import wandb_inspect


def _metric_records(wandb_exe: str, run_dir) -> list[dict]:
    stream = subprocess.run([wandb_exe, "leet", "inspect", str(run_dir), "--json"],
                            capture_output=True, text=True, check=True).stdout
    return [json.loads(li)["metric"] for li in stream.splitlines()
            if li.strip() and json.loads(li).get("type") == "metric"]


@pytest.mark.slow   # slower than a fast-lane test
def test_a_run_prints_one_line_unless_verbose(tmp_path, capfd, caplog, wandb_cli):
    from ablation.runs.tracking import tracked_run

    settings = {"mode": "offline", "project": "p", "group": "g", "verbose": False}
    config = {"spt": True, "lsa": True, "learnable_temperature": True, "seed": 0, "tune": None}
    with caplog.at_level(logging.INFO, logger="ablation.runs.tracking"):
        with tracked_run(settings, name="spt+lsa+temp-s0", config=config, tags=["x"],
                         output_dir=tmp_path) as tracker:
            for epoch in (1, 2):
                tracker.log({"epoch": epoch, "val/top1": 0.5 + 0.1 * epoch}, step=epoch)
            tracker.summarize({"test/top1": 0.55})
    out, err = capfd.readouterr()
    assert "wandb:" not in out + err                      # W&B's own ~30 lines: none
    lines = [r.getMessage() for r in caplog.records if "W&B" in r.getMessage()]
    (run_dir,) = tmp_path.glob("wandb/offline-run-*")
    assert lines == [f"W&B offline run {run_dir.name.split('-')[-1]} in {run_dir} "
                     f"(upload later: wandb sync {run_dir})"]
    seen = wandb_inspect(wandb_cli, run_dir)
    assert seen["config"]["variant"] == "SL-ViT" and seen["config"]["spt"] is True
    assert seen["summary"]["val/top1"] == {"max": pytest.approx(0.7)}
    metrics = _metric_records(wandb_cli, run_dir)
    assert {"glob_name": "*", "step_metric": "epoch"}.items() <= next(
        m for m in metrics if m.get("glob_name") == "*").items()

    assert seen["job_type"] == "train"

    verbose = dict(settings, verbose=True)
    trial = {**config, "tune": {"role": "trial"}}  # a tuned sweep's search job
    with tracked_run(verbose, name="v", config=trial, tags=[], output_dir=tmp_path / "v"):
        pass
    out, err = capfd.readouterr()
    assert "wandb:" in out + err                          # asked for: W&B's own output
    (trial_dir,) = (tmp_path / "v").glob("wandb/offline-run-*")
    assert wandb_inspect(wandb_cli, trial_dir)["job_type"] == "trial"


@pytest.mark.slow
def test_smoke_sweep_runs_group_by_variant_and_print_one_line_each(smoke_sweep, wandb_cli):
    result, root = smoke_sweep.result, smoke_sweep.root
    terminal = result.stdout + result.stderr
    assert not re.search(r"^wandb:", terminal, re.MULTILINE)
    wandb_lines = [li for li in terminal.splitlines() if "W&B" in li]
    assert len(wandb_lines) == 4 + 1                      # one per job, one for the report
    for path in find_records(root):
        record = read_record(path)
        run_dir = path.parent / record["wandb"]["dir"]
        seen = wandb_inspect(wandb_cli, run_dir)
        assert seen["config"]["variant"] == variant_label(record["switches"])
        assert all(seen["config"][k] is v for k, v in record["switches"].items())
        assert seen["job_type"] == "train" and record["variant"] in seen["tags"]
        assert seen["summary"]["val/top1"]["max"] == pytest.approx(
            record["metrics"]["best_val_top1"])
        assert seen["summary"]["test/top1"] == record["metrics"]["test_top1"]
        names = {m.get("name") or m.get("glob_name"): m for m in _metric_records(wandb_cli,
                                                                                  run_dir)}
        assert names["*"]["step_metric"] == "epoch" and "epoch" in names
        assert names["val/top1"]["summary"] == {"max": True}


@pytest.mark.slow
def test_the_documented_sync_command_reaches_every_run_and_the_report(smoke_sweep):
    docs = (ROOT / "docs" / "wandb.md").read_text()
    (command,) = [li.split("#")[0].strip() for li in docs.splitlines()
                  if li.strip().startswith("wandb sync results/smoke")]
    patterns = command.split()[2:]
    sweep = smoke_sweep.root / "smoke"
    found = {p for pattern in patterns
             for p in glob.glob(pattern.replace("results/smoke", str(sweep)))}
    runs = {str(p) for p in sweep.glob("*/wandb/offline-run-*")}
    reports = {str(p) for p in sweep.glob("wandb/offline-run-*")}
    assert len(runs) == 4 and len(reports) == 1
    assert found == runs | reports
