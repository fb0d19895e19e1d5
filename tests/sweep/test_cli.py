"""The product's command, end to end: a 4-job Hydra multirun through the real CLI."""
import json

import pytest

from ablation.runs.record import find_records, read_record
from tests.helpers.commands import run_cli, smoke_overrides
from tests.helpers.wandb_runs import wandb_inspect

pytestmark = pytest.mark.slow

VARIANTS = {
    (True, True, True): "spt+lsa+temp", (True, False, False): "spt",
    (False, True, True): "lsa+temp", (False, False, False): "vit",
}


def test_four_job_smoke_sweep_writes_records_and_wandb_runs(smoke_sweep, wandb_cli):
    """The shared smoke sweep (conftest): ``-m spt=true,false lsa=true,false``, W&B offline."""
    result, tmp_path = smoke_sweep.result, smoke_sweep.root
    for n, line in enumerate(["spt=on lsa=on temperature=learnable seed=0",
                              "spt=on lsa=off temperature=fixed seed=0",
                              "spt=off lsa=on temperature=learnable seed=0",
                              "spt=off lsa=off temperature=fixed seed=0"], start=1):
        assert f"[{n}/4] {line}" in result.stdout

    records = [read_record(p) for p in find_records(tmp_path)]
    assert len(records) == 4
    assert all(r["status"] == "completed" for r in records)
    by_switches = {tuple(r["switches"].values()): r for r in records}
    assert set(by_switches) == set(VARIANTS)
    sweep_dirs = {p.parent.parent for p in find_records(tmp_path)}
    assert len(sweep_dirs) == 1  # one sweep folder holds the four jobs
    group = records[0]["wandb"]["group"]
    assert group and all(r["wandb"]["group"] == group for r in records)

    for switches, record in by_switches.items():
        assert record["variant"] == VARIANTS[switches]
        run_dir = next(p.parent for p in find_records(tmp_path)
                       if read_record(p)["run_name"] == record["run_name"])
        seen = wandb_inspect(wandb_cli, run_dir / record["wandb"]["dir"])
        assert seen["state"] == "finished" and seen["exit_code"] == 0
        assert seen["group"] == group and seen["job_type"] == "train"
        assert seen["name"] == record["run_name"]
        assert VARIANTS[switches] in seen["tags"]
        assert seen["config"]["spt"] is switches[0] and seen["config"]["lsa"] is switches[1]
        assert seen["config"]["learnable_temperature"] is switches[2]
        assert seen["config"]["trainer"]["epochs"] == 2  # the full config, as nested keys
        assert seen["summary"]["test/top1"] == record["metrics"]["test_top1"]
        assert seen["summary"]["test/top5"] == record["metrics"]["test_top5"]
        assert seen["summary"]["params"] == record["params"]
        assert ("temperature/block_0" in seen["summary"]) is switches[2]
        assert len(seen["history_records"]) == 2
        # locality diagnostics: per epoch, per layer, and the summary
        assert record["diagnostics"]["probe_images"] > 0
        assert len(record["diagnostics"]["layers"]) == record["config"]["model"]["depth"]
        assert (run_dir / "attention_maps.npz").is_file()
        rows = [h["history"]["item"] for h in seen["history_records"]]
        assert all("locality/block_1/mean_distance_px" in row for row in rows)
        assert rows[-1]["locality/heads._type"] == "table-file"  # per-head wandb.Table
        assert seen["summary"]["locality/normalized_entropy"] == pytest.approx(
            record["diagnostics"]["summary"]["normalized_entropy"])
        assert (seen["summary"]["locality/self_attention"] == 0) is switches[1]
    # the resolved config in the record is plain JSON that reproduces the run
    assert json.dumps(records[0]["config"])

    # The sweep ends with the report, next to it, and a W&B `report` run in its group.
    sweep_dir = sweep_dirs.pop()
    for name in ("comparison.md", "comparison.csv", "comparison.tex", "comparison.html",
                 "top1.png", "val_top1.png", "temperature.png", "locality.csv",
                 "locality_distance.png", "locality_entropy.png", "attention_maps.png"):
        assert (sweep_dir / name).is_file(), name
    md = (sweep_dir / "comparison.md").read_text()
    for variant in ("| ViT |", "| SPT |", "| LSA (mask + temp.) |", "| SL-ViT |"):
        assert variant in md
    assert "| ViT |  |  |  | 1 |" in md and "Factorial effects" in md
    assert "## Locality: digits × tiny" in md and "Factorial effects on locality" in md
    assert "| SL-ViT |" in result.stdout  # printed in the terminal too
    (report_dir,) = (sweep_dir / "wandb").glob("offline-run-*")
    report = wandb_inspect(wandb_cli, report_dir)
    assert report["job_type"] == "report" and report["group"] == group
    assert report["state"] == "finished"
    sl_vit = by_switches[(True, True, True)]["metrics"]["test_top1"]
    assert report["summary"]["digits/tiny/holdout/-/SL-ViT/top1"] == pytest.approx(100 * sl_vit)


def test_a_failed_job_does_not_stop_the_sweep_and_every_failure_is_listed(tmp_path):
    # learning rate 1e9 from the first step: the loss diverges; 0.003 trains normally.
    result = run_cli("-m", "trainer.learning_rate=1e9,0.003", "trainer.warmup_fraction=0",
                     "spt=false", "lsa=false", "wandb.mode=disabled", *smoke_overrides(tmp_path))
    assert result.returncode == 1
    paths = {read_record(p)["config"]["trainer"]["learning_rate"]: p for p in find_records(tmp_path)}
    records = {lr: read_record(p) for lr, p in paths.items()}
    assert records[1e9]["status"] == "failed" and "TrainingDiverged" in records[1e9]["error"]
    assert "Traceback" in records[1e9]["traceback"]
    assert records[0.003]["status"] == "completed"  # the sweep went on
    assert "1 run(s) failed:" in result.stdout
    assert f"  {paths[1e9].parent}: TrainingDiverged: training loss became" in result.stdout
    # the job log keeps the traceback
    assert "Traceback" in (paths[1e9].parent / "run_sweep.log").read_text()
    # the report still ran, with the failed run counted in its own block
    md = next(tmp_path.glob("*/comparison.md")).read_text()
    assert "trainer.learning_rate=1000000000.0" in md and "0 (+1 failed)" in md


def test_a_stop_after_the_record_was_written_says_what_to_rerun(tmp_path, capsys):
    """SIGTERM between a job's completed record and the sweep's end: one line saying the
    job completed and what finishes the sweep, never ``vit-s0: None``."""
    import signal

    from omegaconf import OmegaConf

    from ablation.runtime.signals import Interrupted
    from ablation.sweep.cli import stopped
    from tests.helpers.records import record

    folder = record(tmp_path, False, False, False, 0, 0.5, name="vit-s0")
    ended = stopped(Interrupted(signal.SIGTERM), OmegaConf.create({"run_name": "vit-s0"}),
                    str(folder))
    assert ended.code == 143
    line = capsys.readouterr().err.strip()
    assert line == ("vit-s0: completed, then stopped by SIGTERM: rerun the same command to "
                    "finish the sweep and its report (completed jobs are skipped)")
