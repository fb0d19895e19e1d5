"""Hydra's private API, in one place.

Reading a command line as Hydra will, to refuse bad input before anything is
written, needs what Hydra keeps under ``hydra._internal``: its argument parser,
config loader and basic sweeper. They may change in any Hydra release, so
``pyproject.toml`` bounds ``hydra-core`` below the next minor version and
``tests/config/test_hydra_internals.py`` names what moved. Imported lazily:
composing a config never waits for them.
"""
from __future__ import annotations

from pathlib import Path


def args_parser():
    """Hydra's ``argparse`` parser of its own flags (``-m``, ``--cfg``, ...)."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser()


def config_loader(config_dir: str | Path, extra_dir: str | Path | None = None):
    """Hydra's config loader over ``config_dir`` (and ``--config-dir``'s folder),
    plugins' configs included; its ``repository.group_exists`` and
    ``get_group_options`` answer which options a group has."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path

    search_path = create_config_search_path(f"file://{Path(config_dir).resolve()}")
    if extra_dir:
        search_path.append("command-line", f"file://{Path(extra_dir).resolve()}")
    return ConfigLoaderImpl(config_search_path=search_path)


def basic_sweeper() -> type:
    """Hydra's basic sweeper class, which the suite's sweeper extends."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    return BasicSweeper


def sweep_jobs(overrides) -> list[list[str]]:
    """Each job's overrides, as the basic sweeper expands parsed ``overrides``
    (every combination of the comma-separated values), in its order."""
    return [list(job) for batch in basic_sweeper().split_arguments(overrides, None)
            for job in batch]
