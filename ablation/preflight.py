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
"""
from __future__ import annotations

from pathlib import Path

from ablation.config import ConfigError, redact_argv

__all__ = ["check_group_options", "redact_argv"]


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
