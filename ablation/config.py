"""The config contract: switch names, run names, and checks before training.

Hydra composes the config; this module gives the three switches their
readable names (``spt+lsa+temp-s0``) and refuses bad values with one line
before any data is loaded or any model trained.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from omegaconf import OmegaConf

SWITCHES = ("spt", "lsa", "learnable_temperature")
SWITCH_SHORT_NAMES = {"spt": "spt", "lsa": "lsa", "learnable_temperature": "temp"}
WANDB_MODES = ("online", "offline", "disabled")


# The one definition of a secret-looking key: its last dotted component
# *contains* one of these words (``api_key_b64``, ``hf.tokens``,
# ``aws.private_key``), case-insensitive. No key of this project's config does
# (tests/test_secrets_and_guards.py checks every composed key); over-hiding a
# value is harmless, leaking one is not.
_SECRET_WORDS = r"(?:api_?key|token|secret|passw(?:or)?d|passphrase|private_?key|credential|auth)"
SECRET_KEY = re.compile(rf"{_SECRET_WORDS}[^.]*$", re.IGNORECASE)  # in the last component
REDACTED = "***redacted***"
# A secret-named key inside a dict value (``{token: 'a b'}``, ``[{'auth': x}]``)
_NESTED_SECRET = re.compile(rf"""[\w+-]*{_SECRET_WORDS}[\w+-]*['"]?\s*:""", re.IGNORECASE)


def is_secret_key(key) -> bool:
    """True for a key (dotted or not) whose last component names a secret."""
    return bool(SECRET_KEY.search(str(key)))


def holds_secret(value_text: str) -> bool:
    """True if an override's value text has a secret-named key at any depth
    (a dict, or a dict in a list), or was already redacted."""
    return REDACTED in value_text or bool(_NESTED_SECRET.search(value_text))


def redact(value):
    """A copy with the values of secret-looking keys (``api_key``, ``token``...) hidden.

    Secrets belong in the environment (``WANDB_API_KEY``), which nothing here
    records; this catches one passed on the command line anyway before it
    reaches a record or the W&B config.
    """
    if isinstance(value, dict):
        return {k: REDACTED if is_secret_key(k) and v is not None else redact(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


# The whole value: a quoted string (either quote, with escapes), else the rest
# of the line, whatever it holds (spaces, commas, ``=``): over-redacting a line
# of a saved file is harmless, leaking the second half of a key is not.
_SECRET_ASSIGNMENT = re.compile(
    rf"((?<![\w.+-])[\w.+-]*{_SECRET_WORDS}[\w+-]*['\"]?\s*[:=]\s*)"
    r"""('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|[^\n]*[^\s])""", re.IGNORECASE)


def scrub_text(text: str) -> str:
    """Hide the whole value in ``key: value`` / ``key=value`` where the key looks secret."""
    return _SECRET_ASSIGNMENT.sub(lambda m: m.group(1) + REDACTED, text)


def names_secret(override: str) -> bool:
    """True for an override (``+wandb.api_key=...``, ``~x.token``, a dict
    value holding ``{token: ...}``) whose key, or a key inside whose value at
    any depth, names a secret; flags (``-m``, ``--config-dir=...``) are not."""
    if override.startswith("-"):
        return False
    key, has_value, value = override.partition("=")
    return (is_secret_key(key.lstrip("+~").split("@", 1)[0])
            or bool(has_value) and holds_secret(value))


def redact_argv(argv: list[str]) -> list[str]:
    """``argv`` with the whole value of every override that names a secret
    replaced: a secret-named key, or one inside a dict value at any depth."""
    return [f"{arg.split('=', 1)[0]}='{REDACTED}'" if "=" in arg and names_secret(arg) else arg
            for arg in argv]


def scrub_file(path) -> None:
    """Hide secret-looking values in a file Hydra saved (its config and overrides)."""
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        return
    text = path.read_text()
    scrubbed = scrub_text(text)
    if scrubbed != text:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(scrubbed)
        tmp.replace(path)


class ConfigError(ValueError):
    """A config value that cannot work; the message names key, value and what is allowed."""


REFUSAL_PREFIX = "error: "


class Refused(SystemExit):
    """Refused input, on its way to the process that started the command.

    Raised by a job (in whichever process a launcher runs it) or a sweep
    callback, never printed there: ``run_sweep.py`` prints its one line once,
    removes what the command created, and exits 2. A SystemExit so that Hydra
    passes it on untouched; picklable so that joblib's workers hand it back.
    """

    def __init__(self, message) -> None:
        super().__init__(2)
        self.message = str(message)

    def __reduce__(self):
        return (Refused, (self.message,))


def print_refusal(error) -> None:
    """The one way a refusal is shown, wherever it is found (before Hydra, in
    a sweep's first callback, in a job or a launcher's worker): one line on
    stderr, ``error: <what and the fix>``, whatever Hydra's logging does."""
    import sys

    print(f"{REFUSAL_PREFIX}{error}", file=sys.stderr, flush=True)


def as_bool(value, key: str = "switch") -> bool:
    """Hydra parses ``true``/``false`` to bools; anything else is refused."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{key}={value!r} is not a boolean: use {key}=true or {key}=false")


def variant_name(spt, lsa, learnable_temperature) -> str:
    """``vit`` for the plain ViT, else the switches that are on: ``spt+lsa+temp``."""
    on = [SWITCH_SHORT_NAMES[k] for k, v in
          zip(SWITCHES, (spt, lsa, learnable_temperature)) if as_bool(v, k)]
    return "+".join(on) if on else "vit"


def _variant_resolver(spt, lsa, learnable_temperature) -> str:
    """The run-name resolver never raises: a bad switch value is left for
    :func:`validate` to refuse with a clean message (a resolver error would
    surface as an interpolation traceback while Hydra names the output folder)."""
    try:
        return variant_name(spt, lsa, learnable_temperature)
    except ConfigError:
        return "invalid"


def register_resolvers() -> None:
    """``${variant:...}`` for run names, ``${suffix:...}`` for job folder names."""
    if not OmegaConf.has_resolver("variant"):
        OmegaConf.register_new_resolver("variant", _variant_resolver)
    if not OmegaConf.has_resolver("suffix"):
        OmegaConf.register_new_resolver("suffix", folder_suffix)


def split_overrides(text: str) -> list[str]:
    """Hydra's ``override_dirname`` split at its commas, not at those inside
    quotes or brackets (``a='x,y',b=[1,2]`` is two overrides)."""
    items, current, quote, depth, escaped = [], [], None, 0, False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        current.append(ch)
    items.append("".join(current))
    return [item for item in items if item]


def folder_suffix(overrides: str) -> str:
    """``_trainer.learning_rate=0.003`` from Hydra's override_dirname, "" if empty.

    Overrides of secret-looking keys, or whose value holds one (or was
    redacted), are left out, whole: a folder name is no place for a key
    passed on the command line.
    """
    kept = [item for item in split_overrides(str(overrides or "")) if not names_secret(item)]
    return "_" + ",".join(kept) if kept else ""


MAX_NAME_LENGTH = 120          # name, sweep_id, run_name
MAX_FOLDER_NAME_LENGTH = 200   # a job folder: run_name plus the overrides that name it


def check_folder_name(key: str | None, value, limit: int = MAX_NAME_LENGTH) -> None:
    """Refuse a value that is to become one path component but could escape its
    folder or name a hidden or unusable one. ``key`` None: the job folder's name."""
    text = str(value)
    problem = None
    if not text:
        problem = "it is empty"
    elif "/" in text or "\\" in text:
        problem = "it contains a path separator"
    elif text.startswith("."):
        problem = "it starts with a dot"
    elif any(ord(c) < 32 or ord(c) == 127 for c in text):
        problem = "it contains a control character"
    elif len(text) > limit:
        problem = f"it is {len(text)} characters long (at most {limit})"
    if problem and key is None:
        raise ConfigError(
            f"the job folder name {text!r} (run_name and the command-line overrides that "
            f"name it) cannot name a folder ({problem}): give that value without '/' or "
            f"leading '.', or set it in a config file instead of on the command line")
    if problem:
        raise ConfigError(
            f"{key}={text!r} cannot name a folder ({problem}): use a plain name such as "
            f"name=my-sweep, no '/', no leading '.', at most {limit} characters")


def check_folder_names(config: Mapping, job_folder: str) -> None:
    """``name``, ``sweep_id``, ``run_name`` and the job folder's name, before
    anything is written under them."""
    for key in ("name", "sweep_id", "run_name"):
        if config.get(key) is not None:
            check_folder_name(key, config[key])
    check_folder_name(None, job_folder, MAX_FOLDER_NAME_LENGTH)


# Config keys that may differ between runs of one comparison (flattened, dotted):
# what a sweep varies on purpose, and what says nothing about the experiment.
NOT_A_SETTING = {"spt", "lsa", "learnable_temperature", "seed", "run_name", "sweep_id",
                 "name", "results_dir", "resume", "trainer.verbose", "dataset.path",
                 "dataset.search_paths", "trainer.data_workers"}  # threads: same batches
NOT_A_SETTING_PREFIXES = ("wandb.", "hydra.", "report.", "gpu.", "diagnostics.")


def _flatten(config: Mapping, prefix: str = "") -> dict:
    flat = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = json.dumps(value, sort_keys=True)
    return flat


def settings(config: Mapping) -> dict[str, str]:
    """The experiment's setting: every config key that defines what is trained,
    flattened (``trainer.learning_rate``) with JSON-encoded values."""
    return {k: v for k, v in _flatten(config).items()
            if k not in NOT_A_SETTING and not k.startswith(NOT_A_SETTING_PREFIXES)}


def check_same_config(earlier: Mapping | None, config: Mapping, folder) -> None:
    """Refuse to add ``config``'s run to a folder holding another configuration's."""
    if earlier is None or earlier.get("config") is None:
        return
    differ = differing_keys(earlier["config"], redact(dict(config)))
    if differ:
        raise ConfigError(
            f"{folder} holds a run of another configuration (differs in {', '.join(differ)}): "
            f"use another name=..., or resume=false to start over")


def differing_keys(a: Mapping, b: Mapping) -> list[str]:
    """Setting keys whose values differ between two configs (switches and seed included)."""
    def identity(config: Mapping) -> dict[str, str]:
        flat = _flatten(config)
        return {**settings(config), **{k: flat[k] for k in (*SWITCHES, "seed") if k in flat}}

    fa, fb = identity(a), identity(b)
    return sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))


def switches(cfg: Mapping) -> dict[str, bool]:
    return {k: as_bool(cfg[k], k) for k in SWITCHES}


def _positive(cfg: Mapping, key: str, kind=(int, float)) -> None:
    group, name = key.split(".")
    value = cfg[group][name]
    if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
        what = "a positive integer" if kind is int else "a positive number"
        raise ConfigError(f"{key}={value!r} must be {what}")

# trainer.precision: Keras dtype policies (mixed_bfloat16: bf16 compute, fp32 weights).
PRECISIONS = ("float32", "mixed_bfloat16")
# augmentation.implementation (see ablation.model.build_augmentation).
AUGMENTATION_IMPLEMENTATIONS = ("fused", "keras_layers")


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
