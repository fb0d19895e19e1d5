"""Refuse a config that cannot train, with one line naming the fix, before
any data is loaded or any model trained."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ablation.config.refusals import ConfigError
from ablation.config.switches import SWITCHES, as_bool

WANDB_MODES = ("online", "offline", "disabled")


def _positive(cfg: Mapping, key: str, kind=(int, float)) -> None:
    group, name = key.split(".")
    value = cfg[group][name]
    if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
        what = "a positive integer" if kind is int else "a positive number"
        raise ConfigError(f"{key}={value!r} must be {what}")


# trainer.precision: Keras dtype policies (mixed_bfloat16: bf16 compute, fp32 weights).
PRECISIONS = ("float32", "mixed_bfloat16")
# augmentation.implementation (see ablation.augment.chain.build_augmentation):
# official = the per-image recipe in the input pipeline with PIL's semantics.
AUGMENTATION_IMPLEMENTATIONS = ("fused", "keras_layers", "official")


def validate(cfg: Mapping) -> None:
    """Refuse a config that cannot train, with one line naming the fix."""
    for key in SWITCHES:
        as_bool(cfg[key], key)
    seed = cfg["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        # numpy's and Keras' generators take seeds in [0, 2**32)
        raise ConfigError(f"seed={seed!r} must be an integer in [0, 2**32)")
    _positive(cfg, "trainer.epochs", int)
    _positive(cfg, "trainer.batch_size", int)
    _positive(cfg, "trainer.learning_rate")
    warmup = cfg["trainer"]["warmup_fraction"]
    if not 0 <= warmup < 1:
        raise ConfigError(f"trainer.warmup_fraction={warmup!r} must be in [0, 1)")
    trainer = cfg["trainer"]
    if trainer.get("protocol", "holdout") not in ("holdout", "official"):
        raise ConfigError(f"trainer.protocol={trainer['protocol']!r} is not one of "
                          f"holdout, official")
    if not 0 <= float(trainer.get("label_smoothing", 0.0)) < 1:
        raise ConfigError(f"trainer.label_smoothing={trainer['label_smoothing']!r} "
                          f"must be in [0, 1)")
    if int(trainer.get("passes_per_epoch", 1)) < 1:
        raise ConfigError(f"trainer.passes_per_epoch={trainer['passes_per_epoch']!r} "
                          f"must be >= 1")
    precision = cfg["trainer"].get("precision", "float32")
    if precision not in PRECISIONS:
        raise ConfigError(f"trainer.precision={precision!r} is not one of {', '.join(PRECISIONS)}")
    cache = (cfg.get("gpu") or {}).get("compilation_cache")
    if cache is not None and (not isinstance(cache, str) or not cache.strip()):
        raise ConfigError(f"gpu.compilation_cache={cache!r} must be a folder path, or null "
                          f"to compile every time")
    if cache is not None and Path(cache).expanduser().is_file():
        raise ConfigError(f"gpu.compilation_cache={cache!r} is a file, not a folder")
    implementation = cfg.get("augmentation", {}).get("implementation", "fused")
    if implementation not in AUGMENTATION_IMPLEMENTATIONS:
        raise ConfigError(f"augmentation.implementation={implementation!r} is not one of "
                          f"{', '.join(AUGMENTATION_IMPLEMENTATIONS)}")
    mode = cfg["wandb"]["mode"]
    if mode not in WANDB_MODES:
        raise ConfigError(f"wandb.mode={mode!r} is not one of {', '.join(WANDB_MODES)}")
    model = cfg["model"]
    for key in ("image_size", "patch_size", "dim", "depth", "num_heads"):
        _positive(cfg, f"model.{key}", int)
    if model.get("key_dim") is None:
        if model["dim"] % model["num_heads"]:
            raise ConfigError(
                f"model.num_heads={model['num_heads']} does not divide model.dim={model['dim']} "
                f"(needed when model.key_dim is null); set model.key_dim or change num_heads")
    else:
        _positive(cfg, "model.key_dim", int)
    if model["image_size"] % model["patch_size"]:
        raise ConfigError(
            f"model.patch_size={model['patch_size']} does not divide "
            f"model.image_size={model['image_size']}")
    for key in ("dropout", "attention_dropout", "embedding_dropout", "head_dropout", "drop_path"):
        rate = model.get(key, 0.0)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < 1:
            raise ConfigError(f"model.{key}={rate!r} must be a rate in [0, 1)")
    form = model.get("temperature_form", "divide")
    if form not in ("divide", "multiply"):
        raise ConfigError(f"model.temperature_form={form!r} is not one of divide, multiply")
    as_bool(model.get("qkv_bias", True), "model.qkv_bias")
    if as_bool(cfg["spt"], "spt") and model["patch_size"] < 2:
        raise ConfigError("spt=true needs model.patch_size >= 2 (it shifts by half a patch)")
    if "diagnostics" in cfg and as_bool(cfg["diagnostics"]["enabled"], "diagnostics.enabled"):
        _positive(cfg, "diagnostics.probe_images", int)
    fraction = cfg["dataset"]["validation_fraction"]
    if not 0 < fraction < 1:
        raise ConfigError(f"dataset.validation_fraction={fraction!r} must be in (0, 1)")
