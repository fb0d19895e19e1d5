"""The per-run record, ``run.json``: what a run was and what it measured.

Each job leaves this file in its output folder, and the reporter reads only these
files. It is written atomically, so a reader never sees half a record, and the
writer and the reader check it against one schema (:mod:`ablation.runs.record_schema`).
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
from pathlib import Path
from typing import Any

from ablation.files import (UnsafeFile, atomic_write, entries, is_regular, make_folder,
                            read_bytes, walk)
from ablation.runs.record_schema import RUN_ID, SchemaError, validate_history, validate_record

RECORD_FILENAME = "run.json"
# An unfinished run's last checkpoint (see ablation.train.checkpoint): its state file
# is read without Keras to decide, before training, whether a run may resume.
CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "state.json"
# The locality diagnostics' attention maps beside the record (ablation.train.locality_probe).
ATTENTION_MAPS_FILE = "attention_maps.npz"
log = logging.getLogger(__name__)

# A record or checkpoint state larger than this is not one the suite wrote.
MAX_RECORD_BYTES = 64 * 2**20


def _finite(value: Any) -> Any:
    """NaN and infinity become null: strict JSON that every reader accepts."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_record(directory: str | Path, record: dict) -> Path:
    """Write ``record`` to ``directory/run.json`` atomically; returns the path.

    The JSON written is checked against the schema first, so a record the reporter
    would refuse is never written: :class:`RecordError` names the field.
    """
    directory = Path(directory)
    text = json.dumps(_finite(record), indent=2, allow_nan=False, default=str)
    try:
        validate_record(json.loads(text))
    except SchemaError as e:
        raise RecordError(f"refusing to write {directory / RECORD_FILENAME}: {e}") from None
    make_folder(directory)
    return atomic_write(directory / RECORD_FILENAME, text + "\n")


# What a record can do without when the disk refuses the whole of it: the
# per-epoch rows (also in the checkpoint's state), diagnostics, a traceback.
BULKY_FIELDS = ("history", "diagnostics", "traceback")


def save_record(directory: str | Path, record: dict) -> bool:
    """Write ``record``; True if whole. If the disk refuses it, write it without its
    bulky fields, saying in ``unsaved`` and ``save_error`` what was left out and
    why, so what was measured is never reported as not having happened, and return
    False; raise the ``OSError`` only if even that fails, after logging the metrics."""
    try:
        write_record(directory, record)
        return True
    except OSError as error:
        reason = f"{type(error).__name__}: {' '.join(str(error).split())}"
        compact = {k: v for k, v in record.items() if k not in BULKY_FIELDS}
        compact.update(unsaved=[k for k in BULKY_FIELDS if record.get(k)], save_error=reason)
        try:
            write_record(directory, compact)
        except OSError:
            log.error("%s: no record could be written (%s); it measured: status %s, %s "
                      "epochs, %s", directory, reason, record.get("status"),
                      record.get("epochs_completed"), json.dumps(record.get("metrics")))
            raise
        log.warning("%s: the whole record could not be written (%s); written without: %s",
                    directory, reason, ", ".join(compact["unsaved"]) or "nothing")
        return False


class RecordError(ValueError):
    """A ``run.json`` that is unreadable, partial, of an unknown schema or of wrong
    types; the message (one line) names the file and the field."""


def read_record(path: str | Path) -> dict:
    """Read and check one record; raises :class:`RecordError` naming the problem.
    Only a regular file of a sane size is read: a link, a FIFO or a huge file
    planted in a results folder is never followed, waited on or loaded."""
    path = Path(path)
    try:
        record = json.loads(read_bytes(path, MAX_RECORD_BYTES))
    except RecursionError:  # nested thousands deep: a hostile file, not a record
        raise RecordError(f"{path}: not readable JSON (nested too deeply)") from None
    except UnsafeFile as e:
        raise RecordError(str(e)) from None
    except (OSError, ValueError) as e:  # undecodable, not JSON, a 5,000-digit number
        raise RecordError(f"{path}: not readable JSON ({e})") from e
    try:
        validate_record(record)
    except SchemaError as e:
        raise RecordError(f"{path}: {e}") from None
    return record


def find_records(root: str | Path) -> list[Path]:
    """Every ``run.json`` below ``root`` (or ``root`` itself), sorted; hidden folders
    (outputs set aside) are skipped, and links, which would bring another tree's
    runs in, are not followed."""
    root = Path(root)
    if is_regular(root):
        return [root]
    found = []
    for folder, dirs, files in walk(root):  # never into a linked folder
        if RECORD_FILENAME in dirs:
            log.warning("%s is a folder, not a record: skipped", Path(folder) / RECORD_FILENAME)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != RECORD_FILENAME)
        if RECORD_FILENAME in files:
            found.append(Path(folder) / RECORD_FILENAME)
    return sorted(found)


class StateError(ValueError):
    """A checkpoint state file that cannot be used; the message says why."""


def read_state_file(path: str | Path) -> dict:
    """One checkpoint state file, checked for what resuming needs."""
    path = Path(path)
    try:
        state = json.loads(read_bytes(path, MAX_RECORD_BYTES))
    except (OSError, ValueError, RecursionError) as e:  # ValueError: not JSON, digits past the cap
        raise StateError(f"not readable JSON: {' '.join(str(e).split())[:160]}") from None
    if not (isinstance(state, dict) and type(state.get("epoch")) is int
            and 1 <= state["epoch"] < 2**31
            and state.get("model") == f"model-{state['epoch']}.keras"):
        raise StateError("not a checkpoint state (an epoch from 1, and its model-<epoch>.keras)")
    if problem := _state_problem(state, state["epoch"]):
        raise StateError(problem)
    return state


def _state_problem(state: dict, epoch: int) -> str | None:
    """Why a checkpoint state's bookkeeping cannot be this run's, or None."""
    history = state.get("history")
    if not (isinstance(history, list) and len(history) == epoch
            and all(isinstance(row, dict) and row.get("epoch") == i
                    for i, row in enumerate(history, 1))):
        return f"its history does not hold its {epoch} epoch(s), in order"
    try:  # the numbers a resumed record will hold, checked as the record's are
        validate_history(history)
    except SchemaError as e:
        return f"its history is not a record's: {e}"
    seeds = state.get("seed_states")
    if not (isinstance(seeds, list) and all(
            isinstance(s, list) and all(type(x) is int and 0 <= x < 2**63 for x in s)
            for s in seeds)):
        return "its random-generator states are not lists of counts"
    seconds = [state.get("fit_seconds", 0), *(state.get("train_phase_seconds") or [])]
    if not all(type(x) in (int, float) and 0 <= x < math.inf for x in seconds):
        return "its training time is negative or not a number"
    starts = state.get("attempt_starts", [0])
    if not (isinstance(starts, list) and all(type(s) is int and 0 <= s < epoch for s in starts)):
        return "its resume points lie outside its epochs"
    run_id = state.get("wandb_id")
    if run_id is not None and not (isinstance(run_id, str) and re.fullmatch(RUN_ID, run_id)):
        return f"its W&B run id {str(run_id)[:40]!r} is not a plain name"
    return None


def epoch_of(path: Path) -> int | None:
    """5 for ``model-5.keras`` or ``state-5.json``; None for other files."""
    stem, _, number = path.stem.rpartition("-")
    return int(number) if stem in ("model", "state") and number.isdigit() else None


def checkpoint_states(directory: Path, epochs: int | None = None
                      ) -> tuple[list[dict], list[tuple[Path, str]]]:
    """The readable states in ``directory``, newest first (one per epoch), and the
    unreadable or impossible state files with the reason."""
    by_epoch, damaged = {}, []
    files = [directory / STATE_FILE, *sorted(entries(directory, "state-*.json"),
                                              key=lambda path: -(epoch_of(path) or 0))]
    for path in files:
        if not os.path.lexists(path):
            continue
        try:
            state = read_state_file(path)
        except StateError as e:
            damaged.append((path, str(e)))
            continue
        if epochs is not None and state["epoch"] > epochs:
            damaged.append((path, f"it claims epoch {state['epoch']} of a {epochs}-epoch run"))
            continue
        by_epoch.setdefault(int(state["epoch"]), state)
    return [by_epoch[k] for k in sorted(by_epoch, reverse=True)], damaged


def read_state(checkpoint_dir: str | Path) -> dict | None:
    """The newest readable checkpoint state, or None if there is none."""
    states, _ = checkpoint_states(Path(checkpoint_dir))
    return states[0] if states else None


def earlier_run(folder: str | Path) -> dict | None:
    """What an earlier run left in ``folder``: its record if readable, else its
    last checkpoint's state, else None. An unreadable record counts as absent
    here; the job sets it aside before it runs (:func:`unreadable_record`)."""
    folder = Path(folder)
    if os.path.lexists(folder / RECORD_FILENAME):
        try:
            return read_record(folder / RECORD_FILENAME)
        except RecordError:
            pass
    return read_state(folder / CHECKPOINT_DIR)


def unreadable_record(folder: str | Path) -> str | None:
    """Why ``folder``'s ``run.json`` cannot be read, or None (readable or absent)."""
    path = Path(folder) / RECORD_FILENAME
    if not os.path.lexists(path):
        return None
    try:
        read_record(path)
    except RecordError as e:
        return str(e)
    return None
