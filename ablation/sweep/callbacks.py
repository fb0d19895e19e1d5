"""Hydra callbacks: what a sweep does before its first job and after its last.

:class:`SweepStart` checks every job (:mod:`ablation.sweep.preflight`),
publishes the sweep context its jobs read
(:mod:`ablation.runtime.sweep_context`) and prints the estimate
(:mod:`ablation.sweep.estimate`); :class:`SweepEnd` writes the report and
lists the failed jobs (:mod:`ablation.sweep.outcomes`).
"""
from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback

from ablation.config.compose import register_resolvers
from ablation.config.hydra_internals import sweep_jobs
from ablation.runtime import launched
from ablation.runtime.sweep_context import SweepContext, current, publish, update
from ablation.sweep import outcomes
from ablation.sweep.cleanup import missing_folders
from ablation.sweep.preflight import check_jobs
from hydra_plugins.vit_ablation.tuning import check_jobs as check_tunable
from hydra_plugins.vit_ablation.tuning import check_not_swept, planned_jobs

# Launchers that run jobs in other processes (joblib, submitit, Ray) unpickle
# these callbacks there before Hydra names the job's folder, which needs the
# run-name resolver: importing this module registers it.
register_resolvers()

log = logging.getLogger(__name__)



def job_configs(config) -> list[tuple[dict, Path]]:
    """Every job's resolved config (without ``hydra``) and output folder, as the
    sweeper will compose them."""
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    loader = GlobalHydra.instance().config_loader()
    parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
    configs = []
    for overrides in sweep_jobs(parsed):
        job = loader.load_sweep_config(config, overrides)
        plain = {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
                 for k, v in job.items() if k != "hydra"}
        configs.append((plain, Path(job.hydra.sweep.dir) / str(job.hydra.sweep.subdir)))
    return configs


class SweepStart(Callback):
    """Before Hydra writes anything: check every job's config, and count the jobs.

    A bad value anywhere in the sweep (or in a single run) stops it here with
    one line and exit 2, before Hydra creates a folder, so it leaves nothing
    behind and never costs the jobs before it. A fresh sweep context then
    names the folders about to be created (:mod:`ablation.sweep.cleanup`: a
    job that refuses its data later removes exactly those), the outcome
    folder, and every job's epochs for the ``[3/4]`` and per-epoch lines.
    """

    def on_run_start(self, config, **kwargs) -> None:
        from omegaconf import OmegaConf

        from ablation.config.refusals import Refused

        if config.tune is not None:
            raise Refused("tune=... searches each variant over many jobs: run it as a sweep, "
                          "with -m (python run_sweep.py -m ... tune=learning_rate)")

        def run():
            plain = {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
                     for k, v in config.items() if k != "hydra"}
            return [(plain, Path(str(config.hydra.run.dir)))]
        self._check(run, config=config)

    def on_multirun_start(self, config, **kwargs) -> None:
        composed = []

        def sweep():
            check_not_swept(OverridesParser.create().parse_overrides(
                list(config.hydra.overrides.task)))
            composed[:] = jobs = job_configs(config)
            check_tunable([job for job, _ in jobs])  # tune=: before the estimate's probe
            launched.remember(config.hydra.sweep.dir, [folder for _, folder in jobs])
            return jobs
        sweep_dir = Path(str(config.hydra.sweep.dir))
        self._check(sweep, sweep_dir, config)
        # a tuned sweep trains each variant's trials, then its final runs in their own folders
        self._estimate(planned_jobs(config, composed), config.hydra.launcher)

    @staticmethod
    def _estimate(jobs: list[tuple[dict, Path]], launcher) -> None:
        from ablation.sweep import estimate

        estimate.before_sweep(jobs, launcher)

    @staticmethod
    def _check(jobs_of, sweep_dir: Path | None = None, config=None) -> None:
        from hydra.errors import HydraException
        from omegaconf.errors import OmegaConfBaseException

        from ablation.config.compose import explain, flat_keys
        from ablation.config.refusals import ConfigError, Refused
        from ablation.data import DataError

        try:
            jobs = jobs_of()
            check_jobs(jobs)
        except (ConfigError, DataError) as e:
            raise Refused(e) from None
        except (HydraException, OmegaConfBaseException) as e:  # a sweep value: a typo'd key
            valid = flat_keys({k: v for k, v in config.items() if k != "hydra"}) \
                if config is not None else []                   # or an unresolvable value
            message = explain(e, valid)
            if message is None:
                raise
            raise Refused(message) from None
        publish(SweepContext(
            new_folders=missing_folders([*([sweep_dir] if sweep_dir else []),
                                         *(folder for _, folder in jobs)]),
            # where this sweep's jobs say what they did
            outcomes=str(outcomes.start(sweep_dir)) if sweep_dir is not None else None,
            job_epochs=tuple(int(job["trainer"]["epochs"]) for job, _ in jobs)
            if sweep_dir is not None else ()))


class SweepEnd(Callback):
    """When a multirun ends: the report (``report.after_sweep``), then the failures.

    Jobs record a failure in their ``run.json`` and return normally, so the
    sweep runs to the end (Hydra would otherwise skip ``on_multirun_end`` and
    name only the first error). Here every job of *this* sweep that failed is
    listed with its reason, and so is every job that did not finish (stopped
    in a worker process or on a Slurm node: a time limit, ``scancel``, a lost
    node), with the command that resumes them; the process exits 1 if there
    was either. Jobs skipped because another process was running them are
    listed too, and do not change the exit code. What another sweep did in the same folder never
    counts (see :mod:`ablation.sweep.outcomes`).
    """

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = config.hydra.sweep.dir
        if config.report.after_sweep:
            self.write_report(config, sweep_dir)
        folders = launched.forget(sweep_dir)
        if folders is None:  # SweepStart left out of hydra.callbacks
            folders = [f for _, f in job_configs(config)]
        ended = outcomes.tally(sweep_dir, folders, current().outcomes)
        update(outcomes=None)
        if lines := outcomes.summary(sweep_dir, *ended, resume=resume_command()):
            print("\n".join(lines), flush=True)
        if ended.failed or ended.unfinished:
            raise SystemExit(1)

    @staticmethod
    def write_report(config, sweep_dir) -> None:
        """A report that fails is logged, never raised: the records are what matter."""
        from omegaconf import OmegaConf

        from ablation.report import ReportError, write_report

        try:
            report = write_report(
                sweep_dir,
                wandb_settings=OmegaConf.to_container(config.wandb, resolve=True),
                make_plots=bool(config.report.plots))
        except ReportError as e:
            log.warning("no report: %s", e)
            return
        except OSError as e:  # a read-only folder, a full disk
            log.warning("no report: it could not be written to %s (%s); write it elsewhere: "
                        "python -m ablation.report %s --out DIR", sweep_dir,
                        e.strerror or e, shlex.quote(str(sweep_dir)))
            return
        except Exception:
            log.exception("the report failed; rerun it with: python -m ablation.report %s",
                          shlex.quote(str(sweep_dir)))
            return
        print(report.markdown, flush=True)
        log.info("report: %s", ", ".join(str(f) for f in report.files))


def resume_command() -> str:
    """The command that started this sweep, to paste again: it resumes what did not finish."""
    program, *args = sys.argv
    head = ["python", program] if program.endswith(".py") else [Path(program).name]
    return shlex.join([*head, *args])
