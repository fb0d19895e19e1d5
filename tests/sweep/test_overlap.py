"""gpu.jobs_at_once: a multirun's jobs share a GPU without the user choosing a launcher."""
from __future__ import annotations

import sys

import pytest

from ablation.sweep.overlap import AUTO_JOBS_AT_ONCE, launcher_overrides, visible_gpus

SWEEP = ["-m", "spt=true,false", "lsa=true,false"]
JOBLIB = ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={AUTO_JOBS_AT_ONCE}"]


def test_auto_shares_a_gpu_and_keeps_a_cpu_one_job_at_a_time():
    assert launcher_overrides(SWEEP, "auto", gpus=1) == JOBLIB
    assert launcher_overrides(SWEEP, "auto", gpus=0) == []


@pytest.mark.parametrize("args", [
    ["spt=true"],                                                 # a single run
    [*SWEEP, "hydra/launcher=submitit_slurm"],                    # a launcher named
    [*SWEEP, "hydra/launcher=basic"],                             # one at a time, by name
    [*SWEEP, "hydra.launcher.n_jobs=2"],                          # the launcher's own setting
])
def test_what_the_command_line_says_is_left_alone(args):
    assert launcher_overrides(args, "auto", gpus=1) == []


def test_a_number_is_taken_as_given_on_any_machine():
    assert launcher_overrides(SWEEP, 1, gpus=1) == []
    assert launcher_overrides(SWEEP, 2, gpus=0) == ["hydra/launcher=joblib",
                                                    "hydra.launcher.n_jobs=2"]


def test_no_hydra_plugin_at_all_means_one_job_at_a_time(monkeypatch, capsys):
    # A machine without any Hydra plugin has no ``hydra_plugins`` package either.
    monkeypatch.setitem(sys.modules, "hydra_plugins", None)
    monkeypatch.delitem(sys.modules, "hydra_plugins.hydra_joblib_launcher", raising=False)
    assert launcher_overrides(SWEEP, 2, gpus=1) == []
    assert "the joblib launcher is not installed" in capsys.readouterr().out


def test_cuda_visible_devices_narrows_the_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert visible_gpus() == 0


@pytest.mark.parametrize("setting", ["two", 0, -1, 1.5, True])
def test_a_bad_setting_adds_nothing_and_is_left_to_the_config_check(setting):
    assert launcher_overrides(SWEEP, setting, gpus=1) == []


def test_a_bad_setting_on_a_sweep_is_one_line(tmp_path):
    from tests.helpers.commands import run_in_process

    result = run_in_process("-m", "seed=0,1", "experiment=smoke", "gpu.jobs_at_once=two",
                            f"results_dir={tmp_path}/results")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: gpu.jobs_at_once='two' must be auto or a positive integer")
    assert not (tmp_path / "results").exists()
