"""The sweep command: one Hydra job trains one ViT variant; multirun sweeps them
(``python run_sweep.py -m spt=true,false lsa=true,false``, or ``vit-ablation``).
Refused input is one line on stderr and exit 2, before anything is written.
"""
from __future__ import annotations

import functools
import logging
import os
import sys

from ablation.runtime.native_log import quiet_by_default, quiet_native_stderr

# Keep TensorFlow's C++ start-up chatter out of the sweep's output
# (VIT_ABLATION_DEBUG=1 shows it): before anything imports TensorFlow.
quiet_by_default()

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from ablation.config import (ConfigError, Refused, conf_dir, print_refusal,  # noqa: E402
                             register_resolvers, switches)
from ablation.config.switches import job_line  # noqa: E402
from ablation.data import DataError, check_source  # noqa: E402
from ablation.runs.record import RECORD_FILENAME  # noqa: E402
from ablation.runs.tracking import import_early  # noqa: E402
from ablation.runtime.accelerator import configure as configure_device  # noqa: E402
from ablation.runtime.gpu_pinning import pin as pin_gpu  # noqa: E402
from ablation.runtime.process import freeze_imported_objects  # noqa: E402
from ablation.runtime.signals import (STOP_CODES, exit_code, interruptible,  # noqa: E402
                                      stay_stopped, stop_name)
from ablation.runtime.sweep_context import SweepContext, current, publish, update  # noqa: E402
from ablation.sweep.cleanup import remove_all_created, remove_created  # noqa: E402
from ablation.sweep.overlap import launcher_overrides  # noqa: E402
from ablation.sweep.preflight import check_command_line  # noqa: E402
from ablation.sweep.usage import print_job_configs, register_help_resolvers  # noqa: E402
from ablation.sweep.usage import wants_job_configs  # noqa: E402
from hydra_plugins.vit_ablation.outcomes import outcome  # noqa: E402

CONF_DIR = conf_dir()
register_resolvers()
register_help_resolvers()
log = logging.getLogger("vit-ablation")


def refuse(error: Exception, output_dir: str) -> Refused:
    """Bad input: the job's folder removed if this command created it; the
    command's own process prints the one line and removes the rest."""
    remove_created(output_dir)
    return Refused(error)


def progress_line(cfg: DictConfig) -> str:
    """``[3/4] spt=on lsa=off temperature=fixed seed=0`` for the job now starting."""
    flags = switches(cfg)
    hydra_cfg = HydraConfig.get()
    position = ""
    if hydra_cfg.mode.name == "MULTIRUN":
        total = len(current().job_epochs)  # every job's, when the sweep knows them
        position = f"[{hydra_cfg.job.num + 1}{f'/{total}' if total else ''}] "
    return (f"{position}{job_line(flags)} "
            f"seed={cfg.seed} dataset={cfg.dataset.name} model={cfg.model.name}")


def job(cfg: DictConfig) -> dict:
    """One Hydra job: check, train one variant, leave its record; returns what it
    did (:mod:`hydra_plugins.vit_ablation.outcomes`). A module-level function, so
    launchers that run jobs in other processes pickle it by reference."""
    hydra_cfg = HydraConfig.get()
    output_dir = hydra_cfg.runtime.output_dir
    record_path = os.path.join(output_dir, RECORD_FILENAME)
    # the data's paths, on the machine that runs the job, before Keras loads
    try:
        check_source(OmegaConf.to_container(cfg.dataset, resolve=True))
    except DataError as e:
        raise refuse(e, output_dir) from None
    print(progress_line(cfg), flush=True)
    if hydra_cfg.mode.name == "MULTIRUN":  # for the per-epoch lines (ablation.train.progress)
        update(job_num=int(hydra_cfg.job.num))
    import_early(str(cfg.wandb.mode))
    # jobs side by side on a machine with several GPUs: one each, before any backend looks
    pin_gpu(int(hydra_cfg.job.num) if hydra_cfg.mode.name == "MULTIRUN" else None,
            cfg.gpu.devices)
    with quiet_native_stderr():  # TensorFlow's import and first device query
        configure_device(cfg.gpu)
        from ablation.job import JobBusy, run_job, write_failure
    freeze_imported_objects()

    ended = []  # completed, or skipped: completed earlier
    try:
        with interruptible():
            record = run_job(cfg, output_dir, on_end=ended.append)
    except KeyboardInterrupt as e:
        raise stopped(e, cfg, output_dir) from None
    except JobBusy as e:
        log.warning("%s", e)  # one line naming the holder; nothing trained or written
        return outcome("busy", record_path, detail=str(e))
    except (ConfigError, DataError) as e:  # e.g. no network for a download, a bad archive
        raise refuse(e, output_dir) from None
    except Exception as e:
        # run_job has written the failed record and marked the W&B run failed;
        # should it have failed before it could, a record still says so.
        if not os.path.exists(record_path):
            try:
                write_failure(cfg, output_dir, e)
            except OSError as not_written:  # the disk that failed the job refuses this too
                log.error("%s: no record written (%s)", cfg.run_name, not_written)
        log.exception("%s failed: %s: %s", cfg.run_name, type(e).__name__, e)
        if hydra_cfg.mode.name == "MULTIRUN":  # the sweep goes on; its end lists every failure
            return outcome("failed", record_path, detail=f"{type(e).__name__}: {e}")
        raise SystemExit(1) from None
    metrics = record["metrics"]
    log.info("%s: test top-1 %.2f%%, top-5 %.2f%% -> %s", record["run_name"],
             100 * metrics["test_top1"], 100 * metrics["test_top5"], record_path)
    return outcome(ended[0], record_path, top1=metrics["test_top1"], top5=metrics["test_top5"])


def stopped(error: KeyboardInterrupt, cfg: DictConfig, output_dir: str) -> SystemExit:
    """A job stopped by a signal or Ctrl-C: one line on the terminal (what its
    record says), the traceback in the job's log; the exit status ``128 + signal``."""
    from ablation.runs.record import RecordError, read_record

    try:  # a completed record: the stop came after it was written
        line = read_record(os.path.join(output_dir, RECORD_FILENAME))["error"] or (
            f"completed, then stopped by {stop_name(error)}: rerun the same command to finish "
            f"the sweep and its report (completed jobs are skipped)")
    except (RecordError, KeyError, OSError):
        line = f"interrupted by {stop_name(error)}; rerun the same command to resume"
    record = log.makeRecord(log.name, logging.ERROR, __file__, 0, f"{cfg.run_name}: {line}", (),
                            (type(error), error, error.__traceback__))
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)
    print(f"{cfg.run_name}: {line}", file=sys.stderr, flush=True)
    return SystemExit(exit_code(error))


def register_launchers() -> None:
    """Make the suite's plugins (``hydra/launcher=slurm``, ``hydra/sweeper=vit_ablation``)
    known to Hydra. Hydra finds plugins by scanning the ``hydra_plugins`` folders
    on ``sys.path``; an editable install's package is found by an import hook
    instead, which that scan does not see."""
    from hydra.core.plugins import Plugins

    from hydra_plugins.vit_ablation.sweeper import AblationSweeper

    Plugins.instance().register(AblationSweeper)
    try:
        from hydra_plugins.vit_ablation.slurm import SlurmLauncher
    except ImportError:  # no submitit launcher installed: the preset says so when chosen
        return
    Plugins.instance().register(SlurmLauncher)


def run_hydra(args: list[str]) -> None:
    """Hydra's own command line handling of ``args``, with :func:`job` as the task."""
    from hydra.core.global_hydra import GlobalHydra

    saved, sys.argv = sys.argv, [sys.argv[0], *args]
    GlobalHydra.instance().clear()  # each call composes afresh (one per job for -m --cfg)
    register_launchers()
    try:
        hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(job)()
    finally:
        sys.argv = saved


def main() -> None:
    """The command: checks the command line, then runs Hydra (``vit-ablation``)."""
    publish(SweepContext())  # nothing inherited: a refusal removes only what this command made
    try:
        with interruptible():
            composed = check_command_line(sys.argv[1:], CONF_DIR)
            if wants_job_configs(sys.argv[1:]):  # -m --cfg: Hydra's --cfg for each job
                print_job_configs(sys.argv[1:], run_hydra,
                                  functools.partial(check_command_line, conf_dir=CONF_DIR))
            else:
                # on a GPU, a multirun's jobs share it unless a launcher is named
                shared = (launcher_overrides(sys.argv[1:], composed["gpu"]["jobs_at_once"])
                          if composed else [])
                run_hydra([*sys.argv[1:], *shared])
    except KeyboardInterrupt as e:  # between jobs, before the first, or in the report
        then = getattr(e, "then", "rerun the same command to resume")
        print(f"interrupted by {stop_name(e)}; {then}", file=sys.stderr, flush=True)
        stay_stopped()
        sys.exit(exit_code(e))
    except ConfigError as e:
        print_refusal(e)
        sys.exit(2)
    except Refused as e:  # from a job (here or in a launcher's worker) or SweepStart
        print_refusal(e.message)
        remove_all_created()
        sys.exit(2)
    except SystemExit as e:  # (after Refused, which is one) a job stopped by a signal
        if e.code in STOP_CODES:
            stay_stopped()
        raise


if __name__ == "__main__":
    main()
