"""The real Hydra config, composed as the command line composes it."""
from __future__ import annotations

import copy
import functools


def compose(*overrides: str):
    """The config ``run_sweep.py`` would see for these command-line overrides.

    A copy of one composition per distinct set of overrides: composing reads
    and merges every config file again, and many tests ask for the same
    config. The config folder does not change during a test session."""
    return copy.deepcopy(_composed(tuple(overrides)))


@functools.lru_cache(maxsize=None)
def _composed(overrides: tuple[str, ...]):
    from ablation.config import compose as compose_config

    return compose_config(overrides)
