"""The per-run record, ``run.json``: what a run was and what it measured.

Hydra keeps no return values, so each job leaves this file in its output
folder and the reporter reads only these files. It is written atomically
(temporary file, fsync, rename), so a reader never sees half a record and a
crash never leaves a corrupt one behind.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
RECORD_FILENAME = "run.json"
# An unfinished run's last checkpoint (see ablation.checkpoint): its state file
# is read without Keras to decide, before training, whether a run may resume.
CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "state.json"
STATUSES = ("completed", "failed")
# The locality diagnostics' attention maps beside the record (ablation.diagnostics).
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
    """Write ``record`` to ``directory/run.json`` atomically; returns the path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_finite(record), indent=2, allow_nan=False, default=str)
    fd, tmp = tempfile.mkstemp(prefix=".run.", suffix=".json.tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        target = directory / RECORD_FILENAME
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


class RecordError(ValueError):
    """A ``run.json`` that is unreadable, partial or of an unknown schema."""


REQUIRED_KEYS = ("schema", "status", "switches", "dataset", "model", "seed", "config")


def read_record(path: str | Path) -> dict:
    """Read and check one record; raises :class:`RecordError` naming the problem."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordError(f"{path}: not readable JSON ({e})") from e
    if not isinstance(record, dict):
        raise RecordError(f"{path}: not a JSON object")
    if record.get("schema") != SCHEMA_VERSION:
        raise RecordError(f"{path}: unknown schema {record.get('schema')!r} "
                          f"(this version reads {SCHEMA_VERSION})")
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise RecordError(f"{path}: missing {', '.join(missing)}")
    if record["status"] not in STATUSES:
        raise RecordError(f"{path}: unknown status {record['status']!r}")
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
    except (OSError, json.JSONDecodeError):
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
