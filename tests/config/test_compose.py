"""The command-line contract: defaults, the switch keys, and refusals before training."""
import pytest
from omegaconf import OmegaConf

from ablation.config import ConfigError, validate, variant_name
from tests.helpers.commands import run_cli
from tests.helpers.config import compose
from tests.helpers.paths import CONF


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
    assert variant_name(dict(zip(("spt", "lsa", "learnable_temperature"), flags))) == name
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


@pytest.mark.parametrize("implementation", ["fused", "keras_layers"])
def test_autoaugment_is_refused_inside_the_model_and_randaugment_is_not(implementation):
    inside = ("augmentation=paper", f"augmentation.implementation={implementation}")
    with pytest.raises(ConfigError) as error:
        validate(resolved(*inside))
    assert str(error.value) == (
        f"augmentation.policy=autoaugment with augmentation.implementation={implementation}: "
        f"AutoAugment runs only in the input pipeline, with the official code's semantics; "
        f"use augmentation.implementation=official or augmentation.policy=randaugment")
    validate(resolved(*inside, "augmentation.policy=randaugment"))
    validate(resolved("augmentation=paper"))   # implementation=official


def test_cli_refuses_bad_input_before_training_and_writes_nothing(tmp_path):
    result = run_cli("experiment=smoke", "lsa=maybe", f"results_dir={tmp_path}",
                     "wandb.mode=offline")
    assert result.returncode != 0
    assert "lsa='maybe' is not a boolean: use lsa=true or lsa=false" in result.stdout + result.stderr
    assert "Epoch 1" not in result.stdout
    assert not list(tmp_path.rglob("run.json"))
    assert not list(tmp_path.rglob("*.wandb"))


def leaf_keys(node, prefix=""):
    for key, value in node.items():
        if isinstance(value, dict) and value:
            yield from leaf_keys(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def every_composition():
    """Every preset, and every option of every group with the defaults around it."""
    yield []
    for preset in sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")):
        yield [f"experiment={preset}"]
    for group in ("dataset", "model", "augmentation", "trainer", "wandb", "gpu", "diagnostics"):
        for option in sorted(p.stem for p in (CONF / group).glob("*.yaml")):
            yield [f"{group}={option}"]


@pytest.mark.slow   # slower than a fast-lane test
def test_every_setting_of_every_preset_has_a_declared_type():
    """A setting added to conf/ without a type and range in the schema fails here."""
    from ablation.config.schema import declared

    seen = set()
    for overrides in every_composition():
        config = resolved(*overrides)
        seen |= set(leaf_keys(config))
        validate(config)
    assert {"trainer.label_smoothing", "augmentation.mixing.cutmix_alpha",
            "dataset.class_names", "model.mlp_hidden_units"} <= seen
    assert sorted(k for k in seen if not declared(k)) == []
    assert not declared("trainer.no_such_key") and not declared("model.dim.x")


@pytest.mark.parametrize("override, words", [
    ("trainer.label_smoothing=abc", "trainer.label_smoothing='abc' must be a number in [0, 1)"),
    ("trainer.min_learning_rate=-inf", "trainer.min_learning_rate=-inf must be a finite number"),
    ("model.key_dim=0", "model.key_dim=0 must be a positive integer below 2**31, or null"),
    ("model.pooling=max", "model.pooling='max' is not one of flatten, class_token, mean"),
    ("dataset.validation_fraction=1", "dataset.validation_fraction=1 must be a number in (0, 1)"),
    ("trainer.epochs=true", "trainer.epochs=True must be a positive integer"),
    ("wandb.tags=abc", "wandb.tags='abc' must be a list of strings"),
    ("+model.extra=1", "model.extra is not a setting of model: its keys are name, image_size"),
])
def test_schema_refusals_are_one_line(override, words):
    with pytest.raises(ConfigError) as error:
        validate(resolved(override))
    assert words in str(error.value) and "\n" not in str(error.value)


def test_the_configuration_page_lists_every_declared_setting():
    import re

    from ablation.config.schema import declared_keys

    text = (CONF.parent / "docs" / "configuration.md").read_text()
    section = text.split("\n## Types and ranges\n", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([^`]+)` \| (.+) \|$", section, flags=re.MULTILINE))
    assert rows == declared_keys()
