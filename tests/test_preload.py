"""The suite's preloaded command runner stands in for a fresh ``python``: same
output, exit code and files, and a fresh process wherever importing would differ."""
from pathlib import Path

import pytest

from tests.helpers import preload
from tests.helpers.commands import run_python

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


def test_what_the_imports_set_is_no_difference():
    """Variables TensorFlow's import sets (in the server, or later in the test's own
    process) are a fork's anyway."""
    assert preload.forkable({**BASE, "TF2_BEHAVIOR": "1"}, BASE, ["TF2_BEHAVIOR"])
    assert not preload.forkable({**BASE, "TF2_BEHAVIOR": "1"}, BASE)


@pytest.mark.parametrize("argv, forks", [
    (["run_sweep.py", "--help"], True), (["-m", "ablation.report"], True),
    (["-c", "print(1)"], False), (["-u", "run_sweep.py"], False), (["-m"], False), ([], False),
])
def test_only_scripts_and_modules_are_forked(argv, forks):
    assert preload.runs_here(argv) is forks


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
        assert getattr(forked, "forked", False) and not hasattr(fresh, "forked"), argv
        assert (forked.returncode, forked.stdout, forked.stderr) == \
               (fresh.returncode, fresh.stdout, fresh.stderr), argv
    assert forked.returncode != 0 and "absent" in forked.stderr


@pytest.mark.slow
def test_each_fork_has_its_own_wandb_media_folder():
    """wandb makes its media folder when it is imported and deletes it when the
    process exits: each fork makes its own, so one command's exit does not take
    the folder of the next (where its tables are written)."""
    first, second = (run_python("-m", "tests.helpers.wandb_media") for _ in range(2))
    assert first.returncode == 0 and second.returncode == 0, second.stderr[-2000:]
    assert first.stdout != second.stdout
    assert not Path(first.stdout.strip()).exists()  # its own, gone with it
