"""The real Hydra config, composed as the command line composes it."""
from __future__ import annotations


def compose(*overrides: str):
    """The config ``run_sweep.py`` would see for these command-line overrides."""
    from ablation.config import compose as compose_config

    return compose_config(overrides)
