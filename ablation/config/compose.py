"""The Hydra config: its folder, its resolvers, and composing it as a sweep will.

:func:`compose_config` gives code outside a Hydra job (benchmarks, tests) the
config ``run_sweep.py`` would build from the same overrides; :func:`check_composes`
and :func:`check_group_options` turn what Hydra would report as a block of lines
or a traceback into one :class:`ConfigError` line.
"""
from __future__ import annotations

from pathlib import Path

from ablation.config.environment import check_environment
from ablation.config.folders import folder_suffix
from ablation.config.hydra_internals import args_parser, config_loader
from ablation.config.refusals import ConfigError
from ablation.config.secrets import check_no_secrets
from ablation.config.settings import dotted
from ablation.config.switches import SWITCHES, variant_name

CONFIG_NAME = "config"


def conf_dir() -> Path:
    """The Hydra config folder: the one packaged beside the code in an installed
    wheel (``ablation/conf``), else the checkout's ``conf/``."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "conf"
    return packaged if (packaged / f"{CONFIG_NAME}.yaml").is_file() else package.parent / "conf"


def _variant_resolver(*, _root_) -> str:
    """``${variant:}``: the variant's name from the config's switches (every
    switch of the registry). It never raises: a bad switch value is left for
    :func:`ablation.config.validate.validate` to refuse with a clean message (a
    resolver error would surface as an interpolation traceback while Hydra
    names the output folder)."""
    try:
        return variant_name({k: _root_[k] for k in SWITCHES})
    except Exception:  # noqa: BLE001 - ConfigError, or an interpolation that fails
        return "invalid"


def register_resolvers() -> None:
    """``${variant:...}`` for run names, ``${suffix:...}`` for job folder names,
    ``${div:a,b}`` (a // b) for a patch that scales with the image, as the official
    ``create_model`` chooses it."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("variant"):
        OmegaConf.register_new_resolver("variant", _variant_resolver)
    if not OmegaConf.has_resolver("suffix"):
        OmegaConf.register_new_resolver("suffix", folder_suffix)
    if not OmegaConf.has_resolver("div"):
        OmegaConf.register_new_resolver("div", lambda a, b: int(a) // int(b))


def compose(overrides=(), *, hydra_config: bool = False):
    """The (unresolved) DictConfig Hydra composes from ``overrides``, unchecked."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    register_resolvers()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return hydra_compose(config_name=CONFIG_NAME, overrides=list(overrides),
                             return_hydra_config=hydra_config)


def compose_config(overrides=()) -> dict:
    """The resolved run config ``run_sweep.py`` would build from the same
    overrides; :class:`ConfigError` (one line) where it would refuse them."""
    from omegaconf import OmegaConf

    check_group_options(list(overrides), conf_dir())
    check_composes(list(overrides), conf_dir())
    return OmegaConf.to_container(compose(overrides), resolve=True)


def job_values(job) -> dict:
    """A composed job config's resolved values, ``hydra`` left out."""
    from omegaconf import OmegaConf

    return {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
            for k, v in job.items() if k != "hydra"}


def sweep_job(loader, config, overrides) -> tuple[dict, Path]:
    """A sweep job's resolved values and folder, as Hydra's ``loader`` composes them."""
    job = loader.load_sweep_config(config, list(overrides))
    return job_values(job), Path(str(job.hydra.sweep.dir)) / str(job.hydra.sweep.subdir)


def flat_keys(node) -> list[str]:
    """Every dotted key of a dict whose values may be DictConfigs (read unresolved), for
    "did you mean"."""
    from omegaconf import OmegaConf

    plain = {key: OmegaConf.to_container(value, resolve=False)
             if OmegaConf.is_config(value) else value for key, value in node.items()}
    return list(dotted(plain))


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
                f"use +{key}=...; vit-ablation --cfg job, or python run_sweep.py --cfg job, "
                f"lists them all)")
    if isinstance(cause, InterpolationResolutionError) or (
            isinstance(cause, OmegaConfBaseException) and "interpolation" in first.lower()):
        key = getattr(cause, "full_key", None) or "a value"
        reason = str(cause).strip().splitlines()[0]
        return f"{key} cannot be resolved: {reason}"
    if isinstance(error, (ConfigCompositionException, OmegaConfBaseException)):
        return first
    return None


def check_composes(args: list[str], folder: str | Path) -> dict | None:
    """Compose the config from ``args`` as Hydra will (sweep overrides aside,
    as Hydra's own first composition does) and resolve it; raise
    :class:`ConfigError` with one line for what Hydra would report in many.
    Returns the resolved config, or None where the command is left to Hydra: its
    help, and with ``--config-dir`` (the user's search path) what does not compose."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException
    from omegaconf import OmegaConf

    register_resolvers()
    try:
        parsed_args, _ = args_parser().parse_known_args(args)
    except SystemExit:
        return  # argparse has said why
    if parsed_args.help or parsed_args.hydra_help:
        return  # Hydra's own help: left to Hydra
    searched = parsed_args.config_dir and Path(parsed_args.config_dir).resolve()
    parser = OverridesParser.create()
    plain, sweeps = [f"hydra.searchpath=[file://{searched}]"] if searched else [], []
    for text in parsed_args.overrides:
        try:
            (override,) = parser.parse_overrides([text])
        except OverrideParseException as e:
            if searched:
                return None
            raise ConfigError(explain(e)) from None
        if not override.is_sweep_override():
            plain.append(text)
        else:
            sweeps.append(override)
    name = parsed_args.config_name or CONFIG_NAME
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(Path(folder).resolve()), version_base="1.3"):
            try:
                cfg = compose(name, plain)
                resolved = OmegaConf.to_container(cfg, resolve=True)
                check_no_secrets(resolved)
                check_environment(cfg, sweeps)
                return resolved
            except ConfigError:
                raise
            except Exception as e:
                if searched:  # Hydra reports it, in its own words
                    return None
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


def check_group_options(args: list[str], folder: str | Path) -> None:
    """Refuse ``group=option`` overrides naming an option that does not exist among
    Hydra's own (plugins' included); what this cannot parse is left to Hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed_args, _ = args_parser().parse_known_args(args)
        overrides = OverridesParser.create().parse_overrides(parsed_args.overrides)
    except (HydraException, SystemExit, ValueError):
        return
    loader = config_loader(folder, parsed_args.config_dir)
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
