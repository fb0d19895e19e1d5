"""Hydra callbacks: sweep-level bookkeeping that no single job can see."""
from __future__ import annotations

import logging
import os
from math import prod

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback

log = logging.getLogger(__name__)

SWEEP_SIZE_ENV = "VIT_ABLATION_SWEEP_SIZE"


def sweep_size(overrides: list[str]) -> int:
    """How many jobs the command-line sweep expands to (product of the choices)."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return prod(len(list(o.sweep_iterator())) if o.is_sweep_override() else 1 for o in parsed)


class SweepProgress(Callback):
    """Counts the sweep's jobs so each job can print ``[3/4] spt=on ...``.

    The count travels in an environment variable, which launchers that run
    jobs in worker processes pass on as well.
    """

    def on_multirun_start(self, config, **kwargs) -> None:
        try:
            os.environ[SWEEP_SIZE_ENV] = str(sweep_size(config.hydra.overrides.task))
        except Exception as e:  # a count we cannot work out is not worth failing for
            log.debug("could not count the sweep's jobs: %s", e)
