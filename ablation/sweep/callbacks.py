"""Hydra's callback for what a sweep does before its first job: check every job,
publish the sweep context its jobs read, print the estimate. (The sweep's end is
the suite's sweeper's: :mod:`hydra_plugins.vit_ablation.outcomes`.)"""
from __future__ import annotations

from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback

from ablation.config.compose import job_values, register_resolvers, sweep_job
from ablation.config.hydra_internals import sweep_jobs
from ablation.runtime.sweep_context import SweepContext, publish
from ablation.sweep.cleanup import missing_folders
from ablation.sweep.preflight import check_jobs
from hydra_plugins.vit_ablation.tuned_sweep import check_jobs as check_tunable
from hydra_plugins.vit_ablation.tuned_sweep import check_not_swept, planned_jobs

# Launchers that run jobs in other processes (joblib, submitit, Ray) unpickle
# these callbacks there before Hydra names the job's folder, which needs the
# run-name resolver: importing this module registers it.
register_resolvers()


def job_configs(config) -> list[tuple[dict, Path]]:
    """Every job's resolved config (without ``hydra``) and output folder, as the
    sweeper will compose them."""
    from hydra.core.global_hydra import GlobalHydra

    loader = GlobalHydra.instance().config_loader()
    parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
    return [sweep_job(loader, config, overrides) for overrides in sweep_jobs(parsed)]


class SweepStart(Callback):
    """Before Hydra writes anything: check every job's config, and count the jobs.

    A bad value anywhere in the sweep stops it here, before Hydra creates a folder,
    so it never costs the jobs before it. A fresh sweep context then names the
    folders about to be created (what a refusal may remove) and every job's epochs.
    """

    def on_run_start(self, config, **kwargs) -> None:
        from ablation.config.refusals import Refused

        if config.tune is not None:
            raise Refused("tune=... searches each variant over many jobs: run it as a sweep, "
                          "with -m (python run_sweep.py -m ... tune=learning_rate)")
        self._check(lambda: [(job_values(config), Path(str(config.hydra.run.dir)))], None, config)

    def on_multirun_start(self, config, **kwargs) -> None:
        from ablation.sweep import estimate

        def sweep():
            check_not_swept(OverridesParser.create().parse_overrides(
                list(config.hydra.overrides.task)))
            jobs = job_configs(config)
            check_tunable([job for job, _ in jobs])  # tune=: before the estimate's probe
            return jobs
        jobs = self._check(sweep, Path(str(config.hydra.sweep.dir)), config)
        # a tuned sweep trains each variant's trials, then its final runs in their own folders
        estimate.before_sweep(planned_jobs(config, jobs), config.hydra.launcher)

    @staticmethod
    def _check(jobs_of, sweep_dir: Path | None, config) -> list[tuple[dict, Path]]:
        """The jobs of ``jobs_of()``, checked, with the sweep context published for them."""
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
        except (HydraException, OmegaConfBaseException) as e:  # a typo'd key, a bad ${...}
            message = explain(e, flat_keys({k: v for k, v in config.items() if k != "hydra"}))
            if message is None:
                raise
            raise Refused(message) from None
        publish(SweepContext(
            new_folders=missing_folders([*([sweep_dir] if sweep_dir else []),
                                         *(folder for _, folder in jobs)]),
            job_epochs=tuple(int(job["trainer"]["epochs"]) for job, _ in jobs)
            if sweep_dir is not None else ()))
        return jobs
