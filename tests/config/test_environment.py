"""Values from the environment (ablation/config/environment.py): ``${oc.env:VAR}``
never names a folder or defines the run, directly or through other keys; paths
and where W&B logs may come from it."""
import pytest

from ablation.config import ConfigError, compose_config
from tests.helpers.commands import run_in_process
from tests.helpers.refusals import assert_refused

ENV = {"VIT_TEST_VALUE": "from-the-environment"}


@pytest.fixture
def environment(monkeypatch):
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)


@pytest.mark.parametrize("overrides, key", [
    (["name=${oc.env:VIT_TEST_VALUE}"], "name"),
    (["sweep_id=x-${oc.env:VIT_TEST_VALUE}"], "sweep_id"),
    (["run_name=${oc.env:VIT_TEST_VALUE}"], "run_name"),
    (["+trainer.note=${oc.env:VIT_TEST_VALUE}"], "trainer.note"),
    (["trainer.learning_rate='${oc.decode:${oc.env:VIT_TEST_RATE,0.01}}'"],
     "trainer.learning_rate"),
    (["seed=${oc.env:VIT_TEST_SEED,3}"], "seed"),
    (["spt=${oc.env:VIT_TEST_SPT,false}"], "spt"),
    # through another key that is no setting itself
    (["+wandb.x=${oc.env:VIT_TEST_VALUE}", "name=${wandb.x}"], "name"),
    (["+wandb.x=${oc.env:VIT_TEST_VALUE}", "+trainer.y=${oc.select:wandb.x,z}"], "trainer.y"),
], ids=["name", "sweep_id", "run_name", "new setting", "setting", "seed", "switch",
        "through a reference", "through oc.select"])
def test_the_environment_names_no_folder_and_no_setting(environment, overrides, key):
    with pytest.raises(ConfigError, match=rf"^{key}=.* takes its value from the environment"):
        compose_config(["experiment=smoke", *overrides])


def test_paths_and_where_to_log_may_come_from_the_environment(environment, tmp_path):
    """A common Hydra habit: dataset.path=${oc.env:DATA}/cifar. Paths, the W&B
    destination and mode name no folder and are no setting."""
    config = compose_config(["experiment=smoke", "dataset=cifar10",
                             "dataset.path=${oc.env:VIT_TEST_VALUE}/x",
                             "results_dir=${oc.env:VIT_TEST_VALUE}/results",
                             "wandb.project=${oc.env:VIT_TEST_VALUE}"])
    assert config["dataset"]["path"] == "from-the-environment/x"
    assert config["wandb"]["project"] == "from-the-environment"
    assert config["wandb"]["mode"] in ("online", "offline", "disabled")  # ${oc.env:WANDB_MODE,...}


def test_an_environment_value_in_a_sweep_is_refused_before_anything_is_written(tmp_path):
    result = run_in_process("-m", "experiment=smoke", f"results_dir={tmp_path}/results",
                            "wandb.mode=disabled", "trainer.epochs=1",
                            "dataset.limit_train=64", "dataset.limit_test=32",
                            "report.after_sweep=false", "name=a,${oc.env:VIT_TEST_VALUE}",
                            env=ENV)
    assert_refused(result, "name='${oc.env:VIT_TEST_VALUE}' takes its value from the "
                           "environment", tmp_path)


def test_an_environment_value_in_a_setting_is_refused_by_the_command(tmp_path):
    result = run_in_process("experiment=smoke", f"results_dir={tmp_path}/results",
                            "wandb.mode=disabled", "trainer.epochs=1",
                            "dataset.limit_train=64", "dataset.limit_test=32",
                            "+trainer.note=${oc.env:VIT_TEST_VALUE}", env=ENV)
    assert_refused(result, "trainer.note='${oc.env:VIT_TEST_VALUE}' takes its value from the "
                           "environment", tmp_path)


def test_an_environment_value_in_a_config_dir_file_is_refused(tmp_path):
    """A config folder of the user's (``--config-dir``), left to Hydra otherwise."""
    (tmp_path / "site_conf" / "site").mkdir(parents=True)
    (tmp_path / "site_conf" / "site" / "env.yaml").write_text(
        "# @package _global_\ntrainer:\n  note: ${oc.env:VIT_TEST_VALUE}\n")
    result = run_in_process(f"--config-dir={tmp_path / 'site_conf'}", "experiment=smoke",
                            f"results_dir={tmp_path}/results", "wandb.mode=disabled",
                            "trainer.epochs=1", "dataset.limit_train=64",
                            "dataset.limit_test=32", "+site=env", env=ENV)
    assert_refused(result, "trainer.note='${oc.env:VIT_TEST_VALUE}' takes its value from the "
                           "environment", tmp_path, ["site_conf", "site_conf/site",
                                                     "site_conf/site/env.yaml"])
