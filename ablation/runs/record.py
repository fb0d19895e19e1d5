"""The per-run record, ``run.json``: what a run was and what it measured.

Hydra keeps no return values, so each job leaves this file in its output
folder and the reporter reads only these files. It is written atomically
(temporary file, fsync, rename), so a reader never sees half a record and a
crash never leaves a corrupt one behind. The writer and the reader check it
against one declared schema (:mod:`ablation.runs.schema`).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ablation.runs.files import atomic_write
from ablation.runs.schema import SCHEMA_VERSION, STATUSES, SchemaError, validate_record

__all__ = ["SCHEMA_VERSION", "STATUSES", "RECORD_FILENAME", "CHECKPOINT_DIR", "STATE_FILE",
           "ATTENTION_MAPS_FILE", "RecordError", "write_record", "read_record",
           "find_records", "read_state", "earlier_run"]

RECORD_FILENAME = "run.json"
# An unfinished run's last checkpoint (see ablation.train.checkpoint): its state file
# is read without Keras to decide, before training, whether a run may resume.
CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "state.json"
# The locality diagnostics' attention maps beside the record (ablation.train.locality).
ATTENTION_MAPS_FILE = "attention_maps.npz"


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

    The record is checked against the schema first (what is checked is the
    JSON written), so a record the reporter would refuse is never written:
    :class:`RecordError` names the field. The file gets the mode every other
    output gets (:func:`ablation.runs.files.output_mode`), not ``mkstemp``'s private 0600.
    """
    directory = Path(directory)
    text = json.dumps(_finite(record), indent=2, allow_nan=False, default=str)
    try:
        validate_record(json.loads(text))
    except SchemaError as e:
        raise RecordError(f"refusing to write {directory / RECORD_FILENAME}: {e}") from None
    directory.mkdir(parents=True, exist_ok=True)
    return atomic_write(directory / RECORD_FILENAME, text + "\n")


class RecordError(ValueError):
    """A ``run.json`` that is unreadable, partial, of an unknown schema or of wrong
    types; the message (one line) names the file and the field."""


def read_record(path: str | Path) -> dict:
    """Read and check one record; raises :class:`RecordError` naming the problem."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except RecursionError:  # nested thousands deep: a hostile file, not a record
        raise RecordError(f"{path}: not readable JSON (nested too deeply)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordError(f"{path}: not readable JSON ({e})") from e
    try:
        validate_record(record)
    except SchemaError as e:
        raise RecordError(f"{path}: {e}") from None
    return record


def find_records(root: str | Path) -> list[Path]:
    """Every ``run.json`` below ``root`` (or ``root`` itself), sorted.

    Hidden folders are skipped: they hold outputs set aside by ``resume=false``.
    """
    root = Path(root)
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob(RECORD_FILENAME)
                  if not any(part.startswith(".") for part in p.relative_to(root).parts[:-1]))


def read_state(checkpoint_dir: str | Path) -> dict | None:
    """The last checkpoint's state, or None if there is none (or it is unreadable)."""
    try:
        return json.loads((Path(checkpoint_dir) / STATE_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None


def earlier_run(folder: str | Path) -> dict | None:
    """What an earlier run left in ``folder``: its record if readable, else its
    last checkpoint's state, else None."""
    folder = Path(folder)
    if (folder / RECORD_FILENAME).exists():
        try:
            return read_record(folder / RECORD_FILENAME)
        except RecordError:
            pass  # unreadable: treated as absent, and replaced
    return read_state(folder / CHECKPOINT_DIR)
