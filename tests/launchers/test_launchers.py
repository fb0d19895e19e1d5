"""The smoke sweep through each shipped launcher gives the basic launcher's results.

Same records (apart from timings and paths) and a finished W&B run per job:
jobs in worker processes (joblib), submitit subprocesses and Ray tasks train
exactly what the basic launcher trains in-process.
"""
import pytest

from tests.helpers.commands import run_cli, smoke_overrides
from tests.helpers.launched import comparable, records_by_name
from tests.helpers.wandb_runs import wandb_inspect

# The shared smoke sweep's jobs without lsa, with the same overrides, so its
# records are the basic launcher's: both side by side through joblib, one
# through each launcher that starts a process per job (each process loads
# TensorFlow and traces the model again).
SWEEP = ["-m", "lsa=false", "wandb.mode=offline"]

pytestmark = pytest.mark.slow


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
