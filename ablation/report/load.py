"""Run records -> one pandas row per run, grouped into comparable blocks.

Runs are compared only with runs of the same dataset, model and training setting,
backend and data: a config key that differs (other than the switches, the seed
and what says nothing about the experiment), the backend or the data's
fingerprint splits them into labelled blocks instead of being averaged together.
"""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pandas as pd

from ablation.config import SWITCHES, settings
from ablation.config.backend import DEFAULT_BACKEND
from ablation.report import tuned_block
from ablation.runs.epochs import steady_epochs
from ablation.runs.record import RecordError, find_records, read_record
from ablation.runtime.provenance import describe_code

log = logging.getLogger(__name__)

# Config values the report computes with, and what each must be.
USED_CONFIG = {("trainer", "batch_size"): "count", ("trainer", "passes_per_epoch"): "count",
               ("trainer", "protocol"): "text", ("model", "key_dim"): "count",
               ("model", "dim"): "count", ("model", "num_heads"): "count"}
TUNING_SETTING = "tuning"
# An accuracy within this many images of a whole number of correct images is that number.
GRID_TOLERANCE = 0.05


class ReportError(RuntimeError):
    """Nothing to report on; the message says why."""


def read_records(path: str | Path) -> list[tuple[Path, dict]]:
    """Every readable record below ``path``; one warning line per bad file."""
    path = Path(path)
    if not path.exists():
        raise ReportError(f"{path} does not exist")
    files = find_records(path)
    if not files:
        raise ReportError(f"no run.json below {path}: is it a sweep folder or results/?")
    good = []
    for file in files:
        try:
            record = read_record(file)
        except RecordError as e:
            log.warning("skipping %s", e)
            continue
        if problem := unusable(record):
            log.warning("skipping %s: %s", file, problem)
            continue
        good.append((file, record))
    if not good:
        raise ReportError(f"none of the {len(files)} run.json files below {path} is readable")
    return good


def unusable(record: dict) -> str | None:
    """Why the report cannot use ``record`` (a config value it computes with, its
    tuning or diagnostics entry, is of the wrong type or range), or None."""
    for (group, key), kind in USED_CONFIG.items():
        section = record["config"].get(group)
        if section is None:
            continue
        if not isinstance(section, dict):
            return f"its config's {group} is not a mapping"
        value = section.get(key)
        if value is None:
            continue
        if kind == "count" and not (type(value) is int and value > 0):
            return f"its config's {group}.{key} is {value!r}, not a positive whole number"
        if kind == "text" and not isinstance(value, str):
            return f"its config's {group}.{key} is {value!r}, not text"
    return (tuned_block.unusable_tuning(record.get("tuning"))
            or _unusable_diagnostics(record.get("diagnostics")))


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _unusable_diagnostics(entry) -> str | None:
    """Why a record's locality entry cannot be read, or None."""
    if entry is None:
        return None
    summary, layers = (entry.get("summary"), entry.get("layers")) if isinstance(entry, dict) \
        else (None, None)
    if not (isinstance(summary, dict) and all(_number(v) for v in summary.values())
            and {"mean_distance_px", "normalized_entropy"} <= summary.keys()
            and isinstance(layers, list) and all(
                isinstance(layer, dict) and type(layer.get("layer")) is int
                and all(isinstance(v, list) and all(map(_number, v))
                        for k, v in layer.items() if k != "layer") for layer in layers)
            and isinstance(entry.get("left_out", {}), dict)
            and all(type(n) is int and n > 0 for n in entry.get("left_out", {}).values())):
        return "its diagnostics are not the per-layer numbers a run records"
    return None


def load_runs(path: str | Path, split_by_code: bool = False) -> pd.DataFrame:
    """The runs of :func:`load` (a tuned sweep's trials left out)."""
    return load(path, split_by_code)[0]


def load(path: str | Path, split_by_code: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per run below ``path`` (completed, failed and interrupted) with its
    block's ``setting`` label, and a tuned sweep's trials. ``split_by_code``: runs of
    different code are separate blocks too (by default the caption says they differ)."""
    loaded = read_records(path)
    rows = []
    for file, record in loaded:
        metrics = record.get("metrics") or {}
        rows.append({
            **{k: bool(record["switches"].get(k)) for k in SWITCHES},
            "variant": record.get("variant"),
            "dataset": record["dataset"], "model": record["model"],
            "architecture": architecture(record),
            "seed": int(record["seed"]), "status": record["status"],
            "test_top1": metrics.get("test_top1"), "test_top5": metrics.get("test_top5"),
            "best_val_top1": metrics.get("best_val_top1"),
            "final_val_top1": metrics.get("final_val_top1"),
            "role": record.get("role") or "final", "tuning": record.get("tuning"),
            "published": published(record),
            "best_test_top1": metrics.get("best_test_top1"),
            "best_test_top5": metrics.get("best_test_top5"),
            "params": record.get("params"), "train_seconds": record.get("train_seconds"),
            "trainable_params": record.get("trainable_params"),
            "protocol": record_protocol(record),
            "test_images": (record.get("data") or {}).get("test"),
            "train_images_per_s": record.get("train_images_per_s"),
            "error": record.get("error"),
            "wandb_group": (record.get("wandb") or {}).get("group"),
            "wandb_mode": (record.get("wandb") or {}).get("mode"),
            "finished_at": record.get("finished_at") or "",
            "history": record.get("history") or [],
            "diagnostics": record.get("diagnostics") or None,
            "path": str(file),
            "data_fingerprint": (record.get("data") or {}).get("fingerprint"),
            "data_source": (record.get("data") or {}).get("source"),
            "timed_steps": timed_steps(record),
            "temperature_start": temperature_start(record),
            "code": describe_environment(record.get("environment")),
            "code_resumed_under_other": isinstance(record.get("code_history"), list)
                                        and len(record["code_history"]) > 1,
            "_settings": {**settings(record["config"]), **identity(record),
                          **tuned_identity(record.get("tuning")),
                          **({"code": json.dumps(describe_environment(
                              record.get("environment")))} if split_by_code else {})},
        })
    trials = tuned_block.trial_frame(rows)
    rows = [row for row in rows if row["role"] != "trial"]
    if not rows:
        raise ReportError(f"only the trials of a tuned sweep below {path}: its final runs "
                          f"have not run yet (rerun the sweep's command to resume it)")
    runs = pd.DataFrame(rows)
    tuned_block.annotate_finals(runs, trials)
    _add_data_identity(runs)
    runs["setting"] = _setting_labels(runs)
    runs = _drop_duplicates(runs.drop(columns="_settings"))
    for col in ("test_top1", "test_top5", "best_val_top1", "train_seconds", "train_images_per_s",
                "test_images", "trainable_params", "best_test_top1", "best_test_top5",
                "timed_steps", "temperature_start"):
        runs[col] = pd.to_numeric(runs[col], errors="coerce")
    for metric in ("test_top1", "test_top5", "best_test_top1", "best_test_top5"):
        runs[metric], correct = snap_to_test_set(runs[metric], runs["test_images"])
        if metric.startswith("test_"):
            runs[f"{metric}_correct"] = correct
    return runs.reset_index(drop=True), trials


def tuned_identity(entry) -> dict[str, str]:
    """A tuned final run's settings: its searched keys (which differ per variant on
    purpose) replaced by the search protocol, which sets the block apart."""
    if not isinstance(entry, dict):
        return {}
    return {**{key: json.dumps("tuned") for key in entry["params"]},
            TUNING_SETTING: tuned_block.protocol_key(entry)}


def published(record: dict) -> dict | None:
    """The paper's top-1 per variant for the run's model preset, where its experiment
    preset names one (``report.published``, per model preset) for the dataset the run
    trained on (a preset's dataset overridden, the figures no longer apply)."""
    entry = ((record.get("config") or {}).get("report") or {}).get("published")
    tables = entry.get("top1") if isinstance(entry, dict) else None
    top1 = tables.get(record.get("model")) if isinstance(tables, dict) else None
    if not (isinstance(top1, dict) and isinstance(entry.get("source"), str)
            and entry.get("dataset") == record.get("dataset")
            and all(isinstance(k, str) and _number(v) and 0 <= v <= 100
                    for k, v in top1.items())):
        return None
    return {"source": entry["source"], "top1": dict(top1)}


def identity(record: dict) -> dict[str, str]:
    """What makes a run another experiment besides its config: its Keras backend."""
    environment = record.get("environment")
    backend = environment.get("backend") if isinstance(environment, dict) else None
    return {"backend": json.dumps(str(backend or DEFAULT_BACKEND))}


def _add_data_identity(runs: pd.DataFrame) -> None:
    """Where a dataset x model holds runs on more than one data fingerprint, each
    run's fingerprint becomes part of its setting (a block per data)."""
    for _, block in runs.groupby(["dataset", "model", "protocol"]):
        known = block["data_fingerprint"].dropna().unique()
        if len(known) < 2:
            continue
        for index, fingerprint in block["data_fingerprint"].items():
            label = str(fingerprint)[:19] if isinstance(fingerprint, str) else "unrecorded"
            runs.at[index, "_settings"] = {**runs.at[index, "_settings"],
                                           "data": json.dumps(label)}


def describe_environment(environment: dict | None) -> str:
    """``vit-ablation 0.1.0 @ 1a2b3c4, tensorflow 2.21.0, Keras 3.15.1, NumPy 2.3.5``."""
    env = environment if isinstance(environment, dict) else {}
    parts = [f"vit-ablation {describe_code(env.get('code'))}"]
    if env.get("backend"):
        parts.append(f"{env['backend']} {env.get('backend_version') or ''}".strip())
    parts += [f"{name} {env[key]}" for key, name in (("keras", "Keras"), ("numpy", "NumPy"))
              if env.get(key)]
    return ", ".join(parts)


def snap_to_test_set(accuracy: pd.Series, test_images: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Accuracies (float32 means) as exact fractions k/N of the test set, and k; where
    N is unknown or the value is off the grid, kept as it is and k NaN."""
    count = accuracy * test_images
    on_grid = (count - count.round()).abs() < GRID_TOLERANCE
    correct = count.round().where(on_grid)
    return (correct / test_images).where(on_grid, accuracy), correct


def timed_steps(record: dict) -> int | None:
    """Training steps behind ``train_images_per_s``: every epoch but the first of each
    attempt (tracing and compilation)."""
    config, data = record.get("config") or {}, record.get("data") or {}
    trainer = config.get("trainer") or {}
    epochs = record.get("epochs_completed") or len(record.get("history") or [])
    if not (data.get("train") and trainer.get("batch_size") and epochs):
        return None
    images = data["train"] * int(trainer.get("passes_per_epoch") or 1)
    steady = steady_epochs(epochs, record.get("resumed_from_epochs") or [])
    return len(steady) * math.ceil(images / int(trainer["batch_size"]))


def architecture(record: dict) -> str:
    """The run's ``model.architecture`` (``vit`` in records older than the key)."""
    model = (record.get("config") or {}).get("model") or {}
    return model["architecture"] if isinstance(model.get("architecture"), str) else "vit"


def temperature_start(record: dict) -> float | None:
    """The learnable temperature's start value T0 = sqrt(key_dim)."""
    model = (record.get("config") or {}).get("model") or {}
    key_dim = model.get("key_dim") or (model.get("dim") and model.get("num_heads")
                                       and model["dim"] // model["num_heads"])
    return math.sqrt(key_dim) if key_dim else None


def record_protocol(record: dict) -> str:
    """``holdout`` (also records older than the key) or ``official``."""
    return (record.get("protocol")
            or ((record.get("config") or {}).get("trainer") or {}).get("protocol")
            or "holdout")


def _setting_labels(runs: pd.DataFrame) -> pd.Series:
    """``trainer.learning_rate=0.003`` for the keys that differ within a dataset x model."""
    labels = pd.Series("", index=runs.index)
    for (dataset, model, _), block in runs.groupby(["dataset", "model", "protocol"]):
        # the protocol is a block of its own (never mixed), not a setting label
        keys = sorted(set().union(*block["_settings"].map(set)) - {"trainer.protocol"})
        differing = [k for k in keys
                     if block["_settings"].map(lambda s, k=k: s.get(k)).nunique(dropna=False) > 1]
        if differing:
            log.warning("%s x %s: runs differ in %s; reported as separate blocks",
                        dataset, model, ", ".join(differing))
        # one block too: a tuned one still says so
        labels.loc[block.index] = block.apply(
            lambda row, keys=tuple(differing): _label(row, keys), axis=1)
    return labels


def _label(row, keys: tuple[str, ...]) -> str:
    """A run's setting label over the differing ``keys``; a tuned run's says how it was tuned."""
    values = row["_settings"]
    tuned = isinstance(row["tuning"], dict)
    parts = [tuned_block.protocol_label(row["tuning"])] if tuned else []
    if TUNING_SETTING in keys and not tuned:
        parts.append("shared recipe")
    parts += [f"{k}={json.loads(values[k]) if k in values else 'unset'}" for k in keys
              if k != TUNING_SETTING and not (tuned and k in row["tuning"]["params"])]
    return ", ".join(parts)


def _drop_duplicates(runs: pd.DataFrame) -> pd.DataFrame:
    """One run per block, variant and seed: the latest completed one (then the latest)."""
    key = ["dataset", "model", "protocol", "setting", *SWITCHES, "seed"]
    ranked = runs.assign(_done=runs["status"].eq("completed")).sort_values(
        ["_done", "finished_at"])
    kept = ranked.drop_duplicates(key, keep="last")
    for path in runs.loc[ranked.index.difference(kept.index), "path"]:
        log.warning("skipping %s: a later run of the same variant and seed is reported", path)
    return kept.drop(columns="_done").sort_index()
