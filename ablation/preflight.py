"""What ``run_sweep.py`` does with the command line before Hydra sees it.

Two things cannot wait for Hydra:

- A secret passed as an override (``+wandb.api_key='A B'``) would be echoed
  by Hydra's job line, saved in ``.hydra/`` and ``multirun.yaml``, put in a
  folder name and read by wandb from ``sys.argv``. The suite never uses such a
  value (keys belong in the environment), so the whole value is replaced in
  ``sys.argv`` (:func:`ablation.config.redact_argv`, beside the other
  redaction) before Hydra parses it: it then exists nowhere but in this
  process's original argument list, whatever it contained (spaces, commas,
  quotes, ``=``) and however it was quoted.
- An unknown config group option (``dataset=nonexistent``) makes Hydra print
  a 14-line block and exit 1; here it is one line naming the key, the value
  and the valid options, and exit 2, before anything is written.
- An override Hydra cannot parse (``name=é`` unquoted, ``name=~``), a key
  that does not exist (``trainer.epoch=3``) or an interpolation that cannot
  resolve (``name='${oc.env:NOPE}'``, ``name='${name}'``) would be a 5-line
  block, a 7-line block or a 200-line traceback, exit 1: :func:`check_composes`
  composes the config once, as Hydra will, and turns each into one line
  (:func:`explain`), exit 2. Sweep values are checked per job in
  :class:`ablation.hydra_callbacks.SweepStart` with the same :func:`explain`.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ablation.config import ConfigError, redact_argv

__all__ = ["check_backend", "check_composes", "check_group_options", "explain", "redact_argv"]


def check_backend() -> None:
    """Refuse, in one line, a Keras backend that cannot load, before anything is
    written: Keras itself fails at the first job, in a traceback, after Hydra
    has made the job's folder (``KERAS_BACKEND=tensorflw``, a backend not
    installed, a ``keras.json`` that is not a JSON object)."""
    from ablation.device import KERAS_BACKENDS, keras_backend_setting

    if "keras" in sys.modules:  # loaded already: whatever it picked works
        return
    name, source = keras_backend_setting()
    if name is None:
        raise ConfigError(f"Keras cannot read its settings file {source} (it must hold a "
                          f"JSON object, e.g. {{\"backend\": \"tensorflow\"}}): fix or remove it")
    where = {"KERAS_BACKEND": f"KERAS_BACKEND={name}",
             "Keras's default": f"Keras's default backend, {name},"}.get(
                 source, f"backend {name!r} in {source}")
    if not isinstance(name, str) or name not in KERAS_BACKENDS:
        raise ConfigError(f"{where} is not a Keras backend: use one of "
                          f"{', '.join(KERAS_BACKENDS)}")
    if importlib.util.find_spec(name) is None:
        hint = ' (pip install -e ".[jax]")' if name == "jax" else ""
        raise ConfigError(f"{where}, but {name} is not installed{hint}")


def flat_keys(node, prefix: str = "") -> list[str]:
    """Every dotted key of a (Dict)Config or dict, for "did you mean"."""
    from omegaconf import DictConfig

    keys = []
    for key, value in node.items_ex(resolve=False) if isinstance(node, DictConfig) \
            else node.items():
        keys.append(f"{prefix}{key}")
        if isinstance(value, (dict, DictConfig)):
            keys += flat_keys(value, f"{prefix}{key}.")
    return keys


def explain(error: BaseException, valid_keys=()) -> str | None:
    """One line for a Hydra or OmegaConf error about the user's config, or
    None when it is not one (a bug, which should keep its traceback)."""
    import difflib
    import re

    from hydra.errors import ConfigCompositionException, OverrideParseException
    from omegaconf.errors import (
        ConfigAttributeError,
        ConfigKeyError,
        InterpolationResolutionError,
        OmegaConfBaseException,
    )

    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if isinstance(error, OverrideParseException):
        return (f"cannot parse the override {error.override!r} ({first}): quote a value "
                f"with special characters, e.g. name='...' (in the shell: \"name='...'\")")
    cause = error.__cause__ if isinstance(error, ConfigCompositionException) else error
    match = re.search(r"Could not override '([^']+)'", first)
    if match and isinstance(cause, (ConfigKeyError, ConfigAttributeError)):
        key = match.group(1)
        close = difflib.get_close_matches(key, list(valid_keys), n=2, cutoff=0.8)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        return (f"{key} is not a config key{':' if hint else ''} {hint}(to add a new key, "
                f"use +{key}=...; python run_sweep.py --cfg job lists them all)")
    if isinstance(cause, InterpolationResolutionError) or (
            isinstance(cause, OmegaConfBaseException) and "interpolation" in first.lower()):
        key = getattr(cause, "full_key", None) or "a value"
        reason = str(cause).strip().splitlines()[0]
        return f"{key} cannot be resolved: {reason}"
    if isinstance(error, (ConfigCompositionException, OmegaConfBaseException)):
        return first
    return None


def check_composes(args: list[str], conf_dir: str | Path) -> None:
    """Compose the config from ``args`` as Hydra will (sweep overrides aside,
    as Hydra's own first composition does) and resolve it; raise
    :class:`ConfigError` with one line for what Hydra would report in many."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.utils import get_args_parser
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException
    from omegaconf import OmegaConf

    try:
        parsed_args, _ = get_args_parser().parse_known_args(args)
    except SystemExit:
        return  # argparse has said why
    if parsed_args.config_dir or parsed_args.help or parsed_args.hydra_help:
        return  # Hydra's own search path or help: left to Hydra
    parser = OverridesParser.create()
    plain = []
    for text in parsed_args.overrides:
        try:
            (override,) = parser.parse_overrides([text])
        except OverrideParseException as e:
            raise ConfigError(explain(e)) from None
        if not override.is_sweep_override():
            plain.append(text)
    name = parsed_args.config_name or "config"
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(Path(conf_dir).resolve()), version_base="1.3"):
            try:
                cfg = compose(name, plain)
                OmegaConf.to_container(cfg, resolve=True)
            except Exception as e:
                valid = []
                if "Could not override" in str(e):
                    valid = flat_keys(OmegaConf.to_container(compose(name, [
                        o for o in plain if o.split("=", 1)[0].lstrip("+~")
                        not in str(e)])))
                message = explain(e, valid)
                if message is None:
                    raise
                raise ConfigError(message) from None
    finally:
        GlobalHydra.instance().clear()


def check_group_options(args: list[str], conf_dir: str | Path) -> None:
    """Refuse ``group=option`` overrides naming an option that does not exist.

    ``args`` is the command line after the program name. The options are
    Hydra's own (the config folder plus installed plugins, e.g. launchers).
    Anything this cannot parse is left to Hydra, which reports it itself.
    """
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path, get_args_parser
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed_args, _ = get_args_parser().parse_known_args(args)
        overrides = OverridesParser.create().parse_overrides(parsed_args.overrides)
    except (HydraException, SystemExit, ValueError):
        return
    search_path = create_config_search_path(f"file://{Path(conf_dir).resolve()}")
    if parsed_args.config_dir:
        search_path.append("command-line", f"file://{Path(parsed_args.config_dir).resolve()}")
    loader = ConfigLoaderImpl(config_search_path=search_path)
    for override in overrides:
        group = override.key_or_group
        if override.is_delete() or not loader.repository.group_exists(group):
            continue
        if override.is_sweep_override():
            try:
                values = list(override.sweep_string_iterator())
            except Exception:  # range or interval sweeps: not group options
                continue
        else:
            value = override.value()
            values = [value] if isinstance(value, str) else []
        options = loader.get_group_options(group)
        for value in values:
            if value not in options:
                raise ConfigError(f"{group}={value} is unknown: the {group} options are "
                                  f"{', '.join(options)}")
