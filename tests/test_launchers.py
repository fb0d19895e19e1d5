"""The smoke sweep through each shipped launcher gives the basic launcher's results.

Same records (apart from timings and paths) and a finished W&B run per job:
jobs in worker processes (joblib), submitit subprocesses and Ray tasks train
exactly what the basic launcher trains in-process.
"""
import pytest

from ablation.runs.record import find_records, read_record
from tests.helpers.commands import run_cli, smoke_overrides
from tests.helpers.wandb_runs import wandb_inspect

# The shared smoke sweep's jobs without lsa, with the same overrides, so its
# records are the basic launcher's: both side by side through joblib, one
# through each launcher that starts a process per job (each process loads
# TensorFlow and traces the model again).
SWEEP = ["-m", "lsa=false", "wandb.mode=offline"]
TIMING = {"epoch_seconds", "train_seconds", "train_images_per_s", "started_at",
          "finished_at", "locality/seconds"}


def comparable(record: dict) -> dict:
    """A record without what legitimately differs between launches."""
    history = [{k: v for k, v in row.items() if k not in TIMING} for row in record["history"]]
    config = {k: v for k, v in record["config"].items()
              if k not in ("sweep_id", "results_dir", "estimate", "report")}  # the sweep's own
    config["wandb"] = {k: v for k, v in config["wandb"].items() if k != "group"}
    config["gpu"] = {k: v for k, v in config["gpu"].items()   # a path; how jobs are launched
                     if k not in ("compilation_cache", "jobs_at_once")}
    return {"switches": record["switches"], "status": record["status"],
            "metrics": record["metrics"], "history": history, "params": record["params"],
            "config": config, "run_name": record["run_name"]}


pytestmark = pytest.mark.slow


def records_by_name(root) -> dict:
    records = {}
    for path in find_records(root):
        record = read_record(path)
        records[record["run_name"]] = (path, record)
    return records


def sweep(tmp_path, *launcher):
    result = run_cli(*SWEEP, *smoke_overrides(tmp_path), *launcher)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return records_by_name(tmp_path)


@pytest.fixture(scope="module")
def basic(smoke_sweep):
    """The basic launcher's spt-s0 and vit-s0: those of the shared smoke sweep."""
    return {name: found for name, found in records_by_name(smoke_sweep.root).items()
            if name in ("spt-s0", "vit-s0")}


@pytest.mark.parametrize("launcher", [
    # what a GPU's default does: joblib, without naming it
    ["spt=true,false", "gpu.jobs_at_once=2"],
    ["spt=true", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=20"],
    ["spt=false", "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2"],
], ids=["joblib", "submitit_local", "ray"])
def test_launcher_matches_the_basic_launcher(tmp_path, basic, launcher, wandb_cli):
    launched = sweep(tmp_path, *launcher)
    expected = {"spt=true,false": {"spt-s0", "vit-s0"}, "spt=true": {"spt-s0"},
                "spt=false": {"vit-s0"}}[launcher[0]]
    assert set(basic) == {"spt-s0", "vit-s0"} and set(launched) == expected
    for name, (path, record) in launched.items():
        assert comparable(record) == comparable(basic[name][1])
        seen = wandb_inspect(wandb_cli, path.parent / record["wandb"]["dir"])
        assert seen["state"] == "finished" and seen["job_type"] == "train"
        assert seen["summary"]["test/top1"] == record["metrics"]["test_top1"]
    assert next(tmp_path.glob("*/comparison.md")).is_file()  # the report ran at the end
    if "gpu.jobs_at_once=2" in launcher:
        for path, _ in launched.values():
            saved = (path.parent / ".hydra" / "hydra.yaml").read_text()
            assert "JoblibLauncher" in saved and "n_jobs: 2" in saved


def test_sacct_failing_on_every_poll_is_said_once(capsys):
    """A Slurm without accounting: submitit's warning on each poll becomes one plain
    line; its other messages pass as they were."""
    import logging

    from ablation.sweep.submitit_log import NOTE, say_sacct_failure_once

    logger = logging.getLogger("submitit.test")  # a child: the real logger's handlers stay out
    logger.propagate = False
    logger.handlers[:] = [logging.StreamHandler()]
    say_sacct_failure_once("submitit.test")
    say_sacct_failure_once("submitit.test")  # installed once
    for call in range(1, 4):
        logger.warning(f"Call #{call} - Bypassing sacct error Command '['sacct', '-j', '1']' "
                       "returned non-zero exit status 1., status may be inaccurate.")
        logger.warning("Job 1 was requeued")
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"note: {NOTE}", *["Job 1 was requeued"] * 3]
