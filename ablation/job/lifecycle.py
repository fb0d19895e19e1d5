"""One job's lifecycle around the training loop: lock, skip, resume, set aside, record.

Everything here is about the job folder (the training itself is
:func:`ablation.train.fit.train`), so that a job run twice, concurrently, after a
kill or with ``resume=false`` leaves exactly one consistent set of outputs: the
folder's lock is held for the whole job, a completed run is skipped, an interrupted
one resumes from its checkpoint and continues its W&B run, and earlier outputs set
aside go to ``.replaced/<time>/``.
"""
from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import keras

from ablation.config import ConfigError, check_same_config, validate
from ablation.data import DataError, load_dataset_cached
from ablation.data.fingerprint import check_same_data, data_fingerprint
from ablation.job.records import base_record, failed, run_tags
from ablation.data.formats import one_line
from ablation.model.saved import MODEL_FILENAME, save_trained
from ablation.files import (atomic_write, entries, is_regular, read_bytes, replaced_folder,
                            set_aside)
from ablation.runs.lock import job_lock
from ablation.runs.record import (ATTENTION_MAPS_FILE, CHECKPOINT_DIR, RECORD_FILENAME,
                                  earlier_run, read_state, save_record, unreadable_record,
                                  write_record)
from ablation.runs.tracking import set_aside_offline_runs, tracked_run
from ablation.runtime.process import custom_gradient_names, release_finished_graphs
from ablation.runtime.signals import native_stops_surfaced
from ablation.train.checkpoint import load_checkpoint
from ablation.train.checkpoint import remove as remove_checkpoint
from ablation.train.epoch_metrics import EpochMetrics
from ablation.train.fit import train

log = logging.getLogger(__name__)

HYDRA_DIR = ".hydra"  # hydra.output_subdir: written by Hydra before the job's lock is checked
HYDRA_FILE_LIMIT = 1 << 24  # a composed config is a few KiB


# Everything a job writes in its folder beside Hydra's files, the log and the lock.
JOB_OUTPUTS = (RECORD_FILENAME, CHECKPOINT_DIR, MODEL_FILENAME, ATTENTION_MAPS_FILE, "wandb")


def set_aside_outputs(output_dir: Path) -> None:
    """``resume=false``: move an earlier run's outputs to ``.replaced/<time>/``."""
    target = replaced_folder(output_dir)
    if set_aside([output_dir / n for n in JOB_OUTPUTS], target):
        log.info("earlier outputs moved to %s", target)


def set_aside_unreadable_record(output_dir: Path) -> None:
    """A ``run.json`` that cannot be read (damaged, hand-edited, of another
    schema) is never overwritten in silence: it moves to ``.replaced/`` and the
    line says why the job runs again."""
    reason = unreadable_record(output_dir)
    if reason is None:
        return
    target = replaced_folder(output_dir)
    set_aside([output_dir / RECORD_FILENAME], target)
    log.warning("%s: the record is unreadable (%s): set aside in %s; the job runs again",
                output_dir.name, reason, target)


@contextlib.contextmanager
def keep_hydra_files(output_dir: Path):
    """Put back, at the end of the job, the ``.hydra/*.yaml`` the job found at its start.

    Hydra writes ``.hydra/{config,hydra,overrides}.yaml`` into the job folder
    before the job runs, so a second process that then finds the folder locked
    (and skips it) has already overwritten the running job's copies. Its config
    is the same (another config is refused), but ``hydra.yaml`` says which
    launch it was: the holder of the lock restores its own files when it ends.
    """
    folder = output_dir / HYDRA_DIR
    saved = {p: read_bytes(p, HYDRA_FILE_LIMIT) for p in entries(folder, "*.yaml")
             if is_regular(p)}
    try:
        yield
    finally:
        for path, data in saved.items():
            try:
                if read_bytes(path, HYDRA_FILE_LIMIT) != data:
                    atomic_write(path, data, fsync=False)
            except OSError:
                atomic_write(path, data, fsync=False)


def run_job(cfg, output_dir: str | Path,
            on_end: Callable[[str], None] = lambda status: None) -> dict:
    """Validate, train, evaluate, and leave ``output_dir/run.json``; returns the record.

    Bad config values and unloadable data raise before anything is written; a
    folder another process is running raises :class:`JobBusy`. A failure inside
    training is written to the record, marks the W&B run failed, and is re-raised.
    ``on_end`` hears whether the job trained (``completed``) or found its run
    completed already (``skipped``).
    """
    config = validate(cfg)  # what every step of the job reads
    output_dir = Path(output_dir)
    with job_lock(output_dir), keep_hydra_files(output_dir):
        record, ended = _run_locked(config, output_dir)
    on_end(ended)
    return record


def _run_locked(config: dict, output_dir: Path) -> tuple[dict, str]:
    """The job, with the folder's lock held; returns the record and ``completed`` or ``skipped``."""
    fingerprint = data_fingerprint(config["dataset"])  # what this run reads: its identity
    if config["resume"]:
        set_aside_unreadable_record(output_dir)
        previous = earlier_run(output_dir)
        check_same_config(previous, config, output_dir)
        check_same_data(previous, fingerprint, output_dir)
        if previous is not None and previous.get("status") == "completed":
            if previous.get("model_error"):
                return _retry_model_save(config, output_dir, previous), "skipped"
            log.info("%s already completed here: skipped", previous.get("run_name"))
            return previous, "skipped"
    else:
        set_aside_outputs(output_dir)
    started, clock = time.time(), time.perf_counter()
    record = base_record(config)
    record["data"] = dict(fingerprint)  # a failed run says which data it failed on too
    record["timings"] = {"job_started_unix": round(started, 3)}
    try:
        # Data problems (no network, a bad path) surface here and leave no
        # record or W&B run; a stop while the data loads leaves an interrupted one.
        data = load_dataset_cached(config["dataset"], int(config["seed"]))
        record["timings"]["data"] = round(time.perf_counter() - clock, 3)
        # Keras' names and global state, and the one collection per job: the
        # last job's model, graphs and data copies only become garbage once its
        # run_job has returned or raised
        keras.backend.clear_session(free_memory=True)
        record = _train_and_record(config, data, output_dir, record, fingerprint, clock)
    except (ConfigError, DataError):
        raise
    except BaseException as e:
        # stopped or failed before training could write the record: say so,
        # unless an earlier attempt's record is there (it still says where a
        # rerun resumes from)
        if record["status"] == "running" and not is_regular(output_dir / RECORD_FILENAME):
            state = (read_state(output_dir / CHECKPOINT_DIR)
                     if isinstance(e, KeyboardInterrupt) else None)
            write_record(output_dir, failed(record, e, resume_epoch=int(state["epoch"])
                                            if state else None))
        raise
    return record, "completed"


def _retry_model_save(config: dict, output_dir: Path, record: dict) -> dict:
    """A completed run whose model was not saved: save it from the final epoch's
    checkpoint (the same weights) and update the record; nothing is trained again."""
    checkpoint_dir = output_dir / CHECKPOINT_DIR
    final = load_checkpoint(checkpoint_dir, int(config["seed"]), int(config["trainer"]["epochs"]))
    if final is None or final.epoch != int(config["trainer"]["epochs"]):
        log.warning("%s: its model was not saved (%s) and no final checkpoint is left to save "
                    "it from: rerun with resume=false to train it again", record["run_name"],
                    record["model_error"])
        return record
    try:
        saved = save_trained(final.model, output_dir / MODEL_FILENAME)
    except Exception as e:  # noqa: BLE001 - any reason a save fails; a stop is no Exception
        log.warning("%s: the model still cannot be saved (%s); its numbers are kept",
                    record["run_name"], one_line(e))
        return record
    record = {**{k: v for k, v in record.items() if k != "model_error"}, "model_file": saved.name}
    write_record(output_dir, record)
    remove_checkpoint(checkpoint_dir)
    log.info("%s already completed here: its model, not saved then, is saved now from the "
             "final checkpoint (nothing trained again)", record["run_name"])
    return record


def _train_and_record(config: dict, data, output_dir: Path, record: dict,
                      fingerprint: dict, clock: float) -> dict:
    """Resume or start, track, train; always writes the record (completed or failed)."""
    checkpoint_dir = output_dir / CHECKPOINT_DIR
    progress = EpochMetrics()
    earlier_graphs = custom_gradient_names()
    try:
        with native_stops_surfaced():  # Keras builds the checkpoint's model
            resume_from = (load_checkpoint(checkpoint_dir, int(config["seed"]),
                                           int(config["trainer"]["epochs"]))
                           if config["resume"] else None)
        run_id = resume_from.state.get("wandb_id") if resume_from else None
        if config["wandb"]["mode"] != "disabled" and (run_id or resume_from is None):
            # The earlier offline run of this id may be cut short by a kill: the
            # resumed run replays the checkpoint's history and replaces it. A job
            # starting over (killed or failed before its first checkpoint) sets
            # aside every earlier attempt's run: its record describes the new one.
            set_aside_offline_runs(output_dir / "wandb", run_id,
                                   replaced_folder(output_dir) / "wandb")
        with tracked_run(config["wandb"], name=record["run_name"], config=config,
                         tags=run_tags(config), output_dir=output_dir, run_id=run_id
                         ) as tracker:
            record["wandb"] = tracker.info()  # its mode may be offline after a fallback
            if resume_from is not None:
                tracker.replay(resume_from.state["history"])
            timings = record["timings"]
            with native_stops_surfaced():  # so the W&B run and the record see a stop
                record.update(train(config, data, tracker, checkpoint_dir, resume_from,
                                    progress=progress, state_extra={"data": fingerprint}))
            record["timings"] = {**timings, **record.get("timings", {})}
            record["data"] = {**record["data"], **fingerprint}
            record["status"] = "completed"
        if problems := getattr(tracker, "problems", None):  # W&B missed these; the job did not
            record["wandb"]["problems"] = list(problems)
    except BaseException as e:
        state = read_state(checkpoint_dir) if isinstance(e, KeyboardInterrupt) else None
        failed(record, e, progress, resume_epoch=int(state["epoch"]) if state else None)
        raise
    finally:
        record["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        record["timings"].update(job=round(time.perf_counter() - clock, 3),
                                 job_ended_unix=round(time.time(), 3))
        # A record written without its history keeps the checkpoint: its state has it;
        # so does a run whose model was not saved: a rerun saves it from there.
        if (save_record(output_dir, record) and record["status"] == "completed"
                and not record.get("model_error")):
            remove_checkpoint(checkpoint_dir)
        keras.backend.clear_session(free_memory=False)
        release_finished_graphs(earlier_graphs)  # collected when the next job starts
    return record
