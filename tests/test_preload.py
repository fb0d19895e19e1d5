"""The suite's preloaded command runner stands in for a fresh ``python``: same
output, exit code and files, and a fresh process wherever importing would differ."""
import pytest

from tests.helpers import preload
from tests.helpers.commands import run_cli, run_python, smoke_overrides

BASE = {"PATH": "/usr/bin", "HOME": "/root", "TF_CPP_MIN_LOG_LEVEL": "2"}


@pytest.mark.parametrize("changed, forks", [
    ({}, True),
    ({"WANDB_MODE": "offline", "WANDB_API_KEY": "k"}, True),    # read when a run starts
    ({"HYDRA_FULL_ERROR": "1", "VIT_ABLATION_SWEEP": "{}"}, True),
    ({"https_proxy": "http://127.0.0.1:9"}, True),
    ({"PYTEST_CURRENT_TEST": "t.py::x (call)"}, True),
    ({"KERAS_BACKEND": "jax"}, False),                           # fixed while Keras loads
    ({"KERAS_HOME": "/tmp/k"}, False),
    ({"HOME": "/tmp/home"}, False),                               # ~/.keras/keras.json
    ({"TF_CPP_MIN_LOG_LEVEL": "0"}, False),
    ({"VIT_ABLATION_DEBUG": "1"}, False),
    ({"OMP_NUM_THREADS": "1"}, False),                            # anything unknown
])
def test_only_run_time_settings_may_differ_in_a_fork(changed, forks):
    assert preload.forkable({**BASE, **changed}, BASE) is forks
    assert preload.forkable(BASE, {**BASE, **changed}) is forks   # set on either side


def test_a_variable_the_command_lacks_is_a_difference():
    assert not preload.forkable({"PATH": "/usr/bin"}, {"PATH": "/usr/bin", "XLA_FLAGS": "x"})


@pytest.mark.slow
def test_a_forked_command_prints_and_exits_as_a_fresh_one(tmp_path):
    """A refusal, the help page and a module's error: the same stdout, stderr and
    exit code from a fork as from a new interpreter."""
    commands = [
        ("run_sweep.py", "experiment=smoke", "lsa=maybe", f"results_dir={tmp_path}"),
        ("run_sweep.py", "--help"),
        ("-m", "ablation.report", str(tmp_path / "absent")),
    ]
    for argv in commands:
        forked, fresh = run_python(*argv), run_python(*argv, fresh=True)
        assert (forked.returncode, forked.stdout, forked.stderr) == \
               (fresh.returncode, fresh.stdout, fresh.stderr), argv
    assert forked.returncode != 0 and "absent" in forked.stderr


@pytest.mark.slow
def test_forked_jobs_write_their_wandb_media_and_leave_the_servers_alone(tmp_path, wandb_cli):
    """wandb's media folder is made when it is imported and deleted when a
    process exits: each fork has its own, so a second job after the first still
    logs its tables (the attention maps), and the run is complete."""
    from ablation.runs.record import find_records, read_record
    from tests.helpers.wandb_runs import wandb_inspect

    for n in range(2):
        done = run_cli("-m", "spt=false", "lsa=false", "wandb.mode=offline",
                       *smoke_overrides(tmp_path / str(n), "trainer.epochs=1"))
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        (path,) = find_records(tmp_path / str(n))
        record = read_record(path)
        seen = wandb_inspect(wandb_cli, path.parent / record["wandb"]["dir"])
        assert seen["state"] == "finished"
        assert seen["summary"]["test/top1"] == record["metrics"]["test_top1"]
