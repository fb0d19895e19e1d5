"""Hydra callbacks: sweep-level bookkeeping that no single job can see."""
from __future__ import annotations

import logging
import os
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback

from ablation.config.compose import register_resolvers
from ablation.config.hydra_internals import sweep_jobs
from ablation.runs.record import RECORD_FILENAME
from ablation.sweep import outcomes

# Launchers that run jobs in other processes (joblib, submitit, Ray) unpickle
# these callbacks there before Hydra names the job's folder, which needs the
# run-name resolver: importing this module registers it.
register_resolvers()

log = logging.getLogger(__name__)

# Job folders of the sweeps this process started, by sweep folder: SweepEnd
# needs them, and composing every job's config again costs time per job.
_job_folders: dict[str, list[Path]] = {}


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
    behind and never costs the jobs before it. The folders about to be created
    are noted (:mod:`ablation.sweep.cleanup`) so a job that refuses its data later
    can remove exactly those. Every job's epochs travel in an environment
    variable (launchers with worker processes pass it on) for the ``[3/4]``
    and per-epoch lines (:func:`ablation.sweep.estimate.before_sweep`).
    """

    def on_run_start(self, config, **kwargs) -> None:
        from omegaconf import OmegaConf

        def run():
            plain = {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
                     for k, v in config.items() if k != "hydra"}
            return [(plain, Path(str(config.hydra.run.dir)))]
        self._check(run, config=config)

    def on_multirun_start(self, config, **kwargs) -> None:
        composed = []

        def sweep():
            composed[:] = jobs = job_configs(config)
            _job_folders[str(config.hydra.sweep.dir)] = [folder for _, folder in jobs]
            return jobs
        self._check(sweep, Path(str(config.hydra.sweep.dir)), config)
        self._estimate(composed, config.hydra.launcher)

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
        from ablation.sweep.cleanup import note_missing

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
        note_missing([*([sweep_dir] if sweep_dir else []), *(folder for _, folder in jobs)])
        if sweep_dir is not None:  # where this sweep's jobs say what they did
            outcomes.start(sweep_dir)


def job_folder_name(job: dict, folder: Path) -> str:
    """What the job adds below ``results_dir/sweep_id`` (normally one component;
    a separator inside a value shows up here as several)."""
    base = Path(str(job.get("results_dir", ""))) / str(job.get("sweep_id", ""))
    if folder.parts[:len(base.parts)] == base.parts:
        return "/".join(folder.parts[len(base.parts):])
    return folder.name


def check_jobs(jobs: list[tuple[dict, Path]]) -> None:
    """Refuse a sweep that cannot run cleanly, naming the problem in one line."""
    from ablation.config import ConfigError, check_folder_names, check_same_config, validate
    from ablation.data import check_source
    from ablation.data.fingerprint import check_same_data, data_fingerprint, recorded_fingerprint
    from ablation.runs.record import earlier_run
    from ablation.sweep.preflight import check_attention_kernel

    for job, folder in jobs:
        validate(job)
        check_attention_kernel(job)
        check_folder_names(job, job_folder_name(job, folder))
        check_source(job["dataset"])
        check_paths(job, folder)
    sweep_dirs = {folder.parent for _, folder in jobs}
    if len(sweep_dirs) > 1:
        raise ConfigError(
            "this sweep's jobs would go to several sweep folders (" + ", ".join(
                sorted(str(d) for d in sweep_dirs)) + "): give the sweep one name=...")
    seen = {}
    for job, folder in jobs:
        if folder in seen:
            raise ConfigError(f"two jobs of this sweep would share the folder {folder}"
                              f"{apart(seen[folder], job)}")
        seen[folder] = job
        if job.get("resume", True):
            earlier = earlier_run(folder)
            check_same_config(earlier, job, folder)
            if recorded_fingerprint(earlier):
                check_same_data(earlier, data_fingerprint(job["dataset"]), folder)


def apart(first: dict, second: dict) -> str:
    """For the refusal: the keys two jobs sharing a folder differ in (no setting)."""
    from ablation.config.settings import flatten

    a, b = flatten(first), flatten(second)
    if not (keys := sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))):
        return ""
    which = ("which names no folder (not a setting)", "which name no folder (not settings)")
    return f": they differ only in {', '.join(keys)}, {which[len(keys) > 1]}; run each " \
        "under its own name="


# What the suite (and Hydra for it) opens for writing in a job folder and in the
# sweep folder: a link planted at any of these names is refused, not followed.
JOB_FILES = (".lock", ".hydra", ".hydra/config.yaml", ".hydra/hydra.yaml",
             ".hydra/overrides.yaml", "run_sweep.log", "run.json", "checkpoint",
             "checkpoint/state.json", "attention_maps.npz", "model.keras", "wandb",
             ".replaced")
SWEEP_FILES = (".report.lock", "multirun.yaml", ".sweeps", ".replaced", "report")


def check_paths(job: dict, folder: Path) -> None:
    """Refuse, in one line, a job whose writes would leave ``results_dir`` or
    follow a link: an unsafe ``results_dir`` (empty, the root, not writable), a
    job or sweep folder that is or passes through a link, a planted link where
    the suite writes a file."""
    from ablation.config import ConfigError
    from ablation.runs.files import UnsafeFile, check_no_links, check_results_dir

    try:
        root = check_results_dir(job.get("results_dir"))
        check_no_links(root, folder, JOB_FILES)
        check_no_links(root, folder.parent, SWEEP_FILES)
    except UnsafeFile as e:
        raise ConfigError(str(e)) from None


class SweepEnd(Callback):
    """When a multirun ends: the report (``report.after_sweep``), then the failures.

    Jobs record a failure in their ``run.json`` and return normally, so the
    sweep runs to the end (Hydra would otherwise skip ``on_multirun_end`` and
    name only the first error). Here every job of *this* sweep that failed is
    listed with its reason, and the process exits 1 if there was any; jobs
    skipped because another process was running them are listed too, and do
    not change the exit code. What another sweep did in the same folder never
    counts (see :mod:`ablation.sweep.outcomes`).
    """

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = config.hydra.sweep.dir
        if config.get("report", {}).get("after_sweep", True):
            self.write_report(config, sweep_dir)
        folders = _job_folders.pop(str(sweep_dir), None)
        if folders is None:  # SweepStart left out of hydra.callbacks
            folders = [f for _, f in job_configs(config)]
        failures, busy = this_sweeps_jobs(sweep_dir, folders)
        lines = []
        if busy:
            lines.append(f"{len(busy)} job(s) skipped: another process was running them:")
            lines += [f"  {detail}" for _, detail in busy]
            lines.append(f"  once it ends, the report with them: python -m ablation.report "
                         f"{_shown(Path(str(sweep_dir)).resolve())}")
        if failures:
            lines.append(f"{len(failures)} run(s) failed:")
            lines += [f"  {folder}: {error}" for folder, error in failures]
        if lines:
            print("\n".join(lines), flush=True)
        if failures:
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
                        e.strerror or e, sweep_dir)
            return
        except Exception:
            log.exception("the report failed; rerun it with: python -m ablation.report %s",
                          sweep_dir)
            return
        print(report.markdown, flush=True)
        log.info("report: %s", ", ".join(str(f) for f in report.files))


def this_sweeps_jobs(sweep_dir, job_folders: list[Path]
                     ) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
    """(folder, error) of this sweep's failed jobs and (folder, holder line) of
    those it skipped as busy, from the outcomes its jobs reported.

    A job that reported nothing (a launcher that did not pass the environment
    on, a worker that died) is judged by its record, as before outcomes existed.
    """
    folder = os.environ.get(outcomes.OUTCOMES_ENV)
    if not folder:
        return [(p.parent, e) for p, e in failed_runs(sweep_dir)], []
    jobs = [Path(f).resolve() for f in job_folders]
    done = outcomes.collect(folder)
    outcomes.finish(folder)
    log.debug("%d of this sweep's %d jobs reported their outcome", len(done), len(jobs))
    failures, busy = [], []
    for job in [*jobs, *(f for f in done if f not in jobs)]:
        outcome, shown = done.get(job), _shown(job)
        if outcome is None:
            failures += [(shown, e) for _, e in failed_runs(job)]
            if not (job / RECORD_FILENAME).exists():
                failures.append((shown, "the job left neither an outcome nor a record"))
        elif outcome["status"] == "failed":
            failures.append((shown, outcome.get("detail") or "unknown error"))
        elif outcome["status"] == "busy":
            busy.append((shown, outcome.get("detail") or str(shown)))
    return failures, busy


def _shown(folder: Path) -> Path:
    """``folder`` as the user named it: relative to the working folder when below it."""
    try:
        return folder.relative_to(Path.cwd().resolve())
    except ValueError:
        return folder


def failed_runs(sweep_dir) -> list[tuple[Path, str]]:
    """(record path, error) of every failed run below ``sweep_dir``."""
    from ablation.runs.record import RecordError, find_records, read_record

    failures = []
    for path in find_records(sweep_dir) if Path(sweep_dir).exists() else []:
        try:
            record = read_record(path)
        except RecordError as e:
            failures.append((path, f"unreadable record ({e})"))
            continue
        if record["status"] == "failed":
            failures.append((path, record.get("error") or "unknown error"))
    return failures
