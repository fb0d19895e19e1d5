"""Which config keys define an experiment, and which only run it.

Runs are compared, resumed and skipped by their *settings*: every config key
except those a sweep varies on purpose (the switches, the seed) and those
that say nothing about what is trained (paths, names, W&B, verbosity). The
same list decides which command-line overrides name a job folder
(:func:`names_job_folder`).
"""
from __future__ import annotations

import json
from collections.abc import Mapping

from ablation.config.refusals import ConfigError
from ablation.config.switches import SWITCHES

# Config keys that may differ between runs of one comparison (flattened, dotted):
# what a sweep varies on purpose, and what says nothing about the experiment.
NOT_A_SETTING = frozenset({
    *SWITCHES, "seed", "run_name", "sweep_id", "name", "results_dir", "resume",
    "estimate",  # the sweep's cost printed before it starts
    "trainer.verbose", "dataset.path", "dataset.search_paths",
    "trainer.data_workers",  # threads preparing the same batches
    "trainer.save_model",  # whether the trained model is kept, not how it is trained
    # how the same function is computed, so runs either way compare and resume
    # (older records carry model.attention_kernel: every choice computed the same)
    "trainer.pad_batches", "model.attention_kernel",
})
NOT_A_SETTING_PREFIXES = ("wandb.", "hydra.", "report.", "gpu.", "diagnostics.",
                          "tune.")  # a search protocol: records say it (role, tuning)
# A preset's name is no key of the composed config; it names the sweep folder itself.
PRESET_GROUP = "experiment"

# Settings that reached every preset of conf/ after runs were first recorded, each
# with the value every run recorded without it trained with: a record's (or a
# checkpoint's) config that lacks one is read with it, so an older run still
# compares, resumes and reports beside a new one. A run's own config holds every key.
ADDED_SETTINGS = {
    "model.init": "keras", "model.layer_norm_epsilon": 1e-6, "model.architecture": "vit",
    "model.class_depth": None, "model.official_cait_mask": None,
    "augmentation.crop_padding": 0, "augmentation.policy": None,
    "augmentation.random_erasing": 0.0, "augmentation.mixing.probability": 0.0,
    "augmentation.mixing.mixup_alpha": 1.0, "augmentation.mixing.cutmix_alpha": 1.0,
    **{f"dataset.{key}": None for key in (
        "class_names", "image_size", "channels", "test_fraction", "train_size", "test_size",
        "num_classes", "official_statistics")},
}


def is_setting(key: str) -> bool:
    """True for a dotted config key that defines what is trained (``wandb`` as a
    whole, like ``wandb.mode``, does not)."""
    return key not in NOT_A_SETTING and not f"{key}.".startswith(NOT_A_SETTING_PREFIXES)


def names_job_folder(key: str) -> bool:
    """Whether a command-line override of ``key`` adds itself to the job folder's
    name: settings do (two settings, two folders); the rest do not."""
    return key != PRESET_GROUP and is_setting(key)


def dotted(config: Mapping, prefix: str = "") -> dict:
    """Every dotted key of a nested mapping, a group before its keys, and its value."""
    flat = {}
    for key, value in config.items():
        flat[f"{prefix}{key}"] = value
        if isinstance(value, Mapping):
            flat.update(dotted(value, f"{prefix}{key}."))
    return flat


def flatten(config: Mapping) -> dict[str, str]:
    """Dotted keys -> JSON-encoded values (nested mappings flattened)."""
    return {k: json.dumps(v, sort_keys=True) for k, v in dotted(config).items()
            if not isinstance(v, Mapping)}


def settings(config: Mapping) -> dict[str, str]:
    """The experiment's setting: every config key that defines what is trained,
    flattened (``trainer.learning_rate``) with JSON-encoded values; a recorded
    config without one of :data:`ADDED_SETTINGS` has the value it trained with."""
    flat = flatten(config)
    for key, value in ADDED_SETTINGS.items():
        if key not in flat and not any(k.startswith(f"{key}.") for k in flat):
            flat[key] = json.dumps(value, sort_keys=True)
    return {k: v for k, v in flat.items() if is_setting(k)}


def differing_keys(a: Mapping, b: Mapping) -> list[str]:
    """Setting keys whose values differ between two configs (switches and seed included)."""
    def identity(config: Mapping) -> dict[str, str]:
        flat = flatten(config)
        return {**settings(config), **{k: flat[k] for k in (*SWITCHES, "seed") if k in flat}}

    fa, fb = identity(a), identity(b)
    return sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))


def check_same_config(earlier: Mapping | None, config: Mapping, folder) -> None:
    """Refuse to add ``config``'s run to a folder holding another configuration's."""
    if earlier is None or earlier.get("config") is None:
        return
    differ = differing_keys(earlier["config"], config)
    if differ:
        raise ConfigError(
            f"{folder} holds a run of another configuration (differs in {', '.join(differ)}): "
            f"use another name=..., or resume=false to start over")
