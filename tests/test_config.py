"""The command-line contract: defaults, the switch keys, and refusals before training."""
import pytest
from omegaconf import OmegaConf

from ablation.config import ConfigError, validate, variant_name
from conftest import compose, run_cli


def resolved(*overrides):
    return OmegaConf.to_container(compose(*overrides), resolve=True)


def test_default_is_the_keras_io_experiment():
    cfg = resolved()
    assert (cfg["dataset"]["name"], cfg["model"]["name"]) == ("cifar100", "keras_io")
    assert cfg["trainer"] == {**cfg["trainer"], "epochs": 50, "batch_size": 256,
                              "learning_rate": 0.001, "weight_decay": 0.0001,
                              "warmup_fraction": 0.1}
    assert cfg["model"]["image_size"] == 72 and cfg["model"]["patch_size"] == 6
    validate(cfg)


def test_learnable_temperature_follows_lsa_unless_named():
    assert resolved("lsa=false")["learnable_temperature"] is False
    assert resolved("lsa=true")["learnable_temperature"] is True
    assert resolved("lsa=false", "learnable_temperature=true")["learnable_temperature"] is True


@pytest.mark.parametrize("flags, name", [
    ((False, False, False), "vit"), ((True, False, False), "spt"),
    ((False, True, True), "lsa+temp"), ((True, True, True), "spt+lsa+temp"),
    ((False, False, True), "temp")])
def test_variant_names(flags, name):
    assert variant_name(*flags) == name
    spt, lsa, temp = (str(f).lower() for f in flags)
    cfg = resolved(f"spt={spt}", f"lsa={lsa}", f"learnable_temperature={temp}", "seed=3")
    assert cfg["run_name"] == f"{name}-s3"


@pytest.mark.parametrize("override, words", [
    ("lsa=maybe", "lsa='maybe' is not a boolean"),
    ("model.patch_size=5", "model.patch_size=5 does not divide model.image_size=72"),
    ("trainer.epochs=0", "trainer.epochs=0 must be a positive"),
    ("trainer.batch_size=-8", "trainer.batch_size=-8 must be a positive"),
    ("trainer.learning_rate=0", "trainer.learning_rate=0 must be a positive"),
    ("wandb.mode=sometimes", "wandb.mode='sometimes' is not one of online, offline, disabled"),
])
def test_bad_values_are_refused_with_one_line(override, words):
    with pytest.raises(ConfigError) as error:
        validate(resolved(override))
    assert words in str(error.value)
    assert "\n" not in str(error.value)


def test_cli_refuses_bad_input_before_training_and_writes_nothing(tmp_path):
    result = run_cli("experiment=smoke", "lsa=maybe", f"results_dir={tmp_path}",
                     "wandb.mode=offline")
    assert result.returncode != 0
    assert "lsa='maybe' is not a boolean: use lsa=true or lsa=false" in result.stdout + result.stderr
    assert "Epoch 1" not in result.stdout
    assert not list(tmp_path.rglob("run.json"))
    assert not list(tmp_path.rglob("*.wandb"))
