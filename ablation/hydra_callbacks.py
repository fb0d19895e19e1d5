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


class SweepReport(Callback):
    """At the end of a multirun, write the report next to the sweep (``report.after_sweep``).

    A report that fails is logged, never raised: the runs' records are what
    matter, and ``python -m ablation.report <sweep>`` can always be rerun.
    """

    def on_multirun_end(self, config, **kwargs) -> None:
        if not config.get("report", {}).get("after_sweep", True):
            return
        from omegaconf import OmegaConf

        from ablation.report import ReportError, write_report

        sweep_dir = config.hydra.sweep.dir
        try:
            report = write_report(
                sweep_dir,
                wandb_settings=OmegaConf.to_container(config.wandb, resolve=True),
                make_plots=bool(config.report.plots))
        except ReportError as e:
            log.warning("no report: %s", e)
            return
        except Exception:
            log.exception("the report failed; rerun it with: python -m ablation.report %s",
                          sweep_dir)
            return
        print(report.markdown, flush=True)
        log.info("report: %s", ", ".join(str(f) for f in report.files))
