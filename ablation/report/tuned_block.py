"""A tuned sweep in the report: its trials, each variant's chosen values, a figure.

A tuned sweep leaves *trials* (``role: trial``), scored on validation, and *final
runs* (a ``tuning`` entry) at their study's best values. Trials never enter the
comparison; final runs do, as a block of their own, annotated with what the
search found, every number from the trial records.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ablation.config.switches import variant_label

PROTOCOL_KEYS = ("params", "spread", "sampler_seed", "search_seed", "epochs")
DODGE_SHARE = 0.015  # of the panel's span of log10(value) between two variants' points


def _finite_positive(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def unusable_tuning(entry) -> str | None:
    """Why a record's ``tuning`` entry cannot be read, or None (absent or sound)."""
    if entry is None:
        return None
    if not isinstance(entry, dict):
        return "its tuning entry is not a mapping"
    params, values = entry.get("params"), entry.get("values")
    if not (isinstance(entry.get("study"), str) and isinstance(params, list)
            and params and all(isinstance(p, str) for p in params)
            and isinstance(values, dict) and set(values) == set(params)
            and all(_finite_positive(v) for v in values.values())
            and type(entry.get("trials")) is int and entry["trials"] > 0
            and (entry.get("trial") is None or type(entry.get("trial")) is int)):
        return "its tuning entry is not a search's (study, params, values, trials)"
    return None


def protocol_label(entry: dict) -> str:
    """``tuned per variant: trainer.learning_rate`` (a block's setting label)."""
    return f"tuned per variant: {', '.join(entry['params'])}"


def protocol_key(entry: dict) -> str:
    """What sets one search protocol apart, as a setting value (the budget aside: a
    rerun with more trials extends the same search)."""
    return json.dumps({k: entry.get(k) for k in PROTOCOL_KEYS}, sort_keys=True)


def sweep_folder(record_path) -> str:
    """The sweep folder of a run's record: one search per study and sweep folder."""
    return str(Path(record_path).parent.parent)


def trial_frame(rows: list[dict]) -> pd.DataFrame:
    """The trials among the loaded rows: study, variant, number, values, objective."""
    trials = [r for r in rows if r["role"] == "trial" and r["tuning"] is not None]
    frame = pd.DataFrame([{
        "study": r["tuning"]["study"], "trial": r["tuning"].get("trial"),
        "variant": r["variant"], "label": variant_label(r),
        "dataset": r["dataset"], "model": r["model"],
        "values": r["tuning"]["values"], "params": tuple(r["tuning"]["params"]),
        "objective": r["final_val_top1"] if r["status"] == "completed" else np.nan,
        "status": r["status"], "budget": r["tuning"]["trials"], "path": r["path"],
        "sweep": sweep_folder(r["path"]),
    } for r in trials], columns=["study", "trial", "variant", "label", "dataset", "model",
                                 "values", "params", "objective", "status", "budget", "path",
                                 "sweep"])
    frame["objective"] = pd.to_numeric(frame["objective"], errors="coerce")
    return frame


def annotate_finals(runs: pd.DataFrame, trials: pd.DataFrame) -> None:
    """Each tuned final run's search, from its own sweep folder: ``tuned_values``,
    ``tuned_val_top1`` (the validation top-1 of the trial at those values, never another
    trial's: NaN if no completed trial record has them), ``tuned_trials`` (with a record)
    and ``tuned_budget`` (the largest its final runs were launched under)."""
    for col in ("tuned_values", "tuned_val_top1", "tuned_trials", "tuned_budget"):
        runs[col] = None
    sweeps = runs["path"].map(sweep_folder)
    for index, entry in runs["tuning"].items():
        if entry is None:
            continue
        sweep = sweeps[index]
        mine = trials[(trials["study"] == entry["study"]) & (trials["sweep"] == sweep)]
        chosen = mine[(mine["status"] == "completed")
                      & (mine["values"].map(lambda v: v == entry["values"]))]
        runs.at[index, "tuned_values"] = entry["values"]
        runs.at[index, "tuned_val_top1"] = float(chosen["objective"].max())
        runs.at[index, "tuned_trials"] = int(mine["trial"].nunique())
        runs.at[index, "tuned_budget"] = max(
            e["trials"] for e, folder in zip(runs["tuning"], sweeps) if isinstance(e, dict)
            and e["study"] == entry["study"] and folder == sweep)


def values_text(values) -> str:
    """``learning_rate 0.00316``: each searched key's last part and its value."""
    if not isinstance(values, dict):
        return ""
    return ", ".join(f"{key.rsplit('.', 1)[-1]} {value:g}" for key, value in values.items())


def protocol_sentence(block: pd.DataFrame) -> str:
    """The tuned block's caption sentence: how the values were chosen."""
    entries = [e for e in block.get("tuning", pd.Series(dtype=object)) if isinstance(e, dict)]
    if not entries:
        return ""
    entry = entries[0]
    seeds = sorted({int(s) for cell in block.get("final_seeds", []) if isinstance(cell, list)
                    for s in cell})
    epochs = (f"{entry['epochs']} epoch{'s' if entry['epochs'] != 1 else ''}"
              if entry.get("epochs") else "the final runs' epochs")
    return (f"Tuned per variant on the validation split only (the test split is never read "
            f"for a choice): {', '.join(entry['params'])} searched log-uniformly within a "
            f"factor {entry['spread']:g} of the preset's value, the same budget of "
            f"{entry['trials']} trials for every variant (Optuna TPE, sampler seed "
            f"{entry['sampler_seed']}), each trial trained with seed {entry['search_seed']} "
            f"and {epochs}, scored by its final-epoch validation top-1; the final runs "
            f"(seeds {', '.join(map(str, seeds))}) train at their variant's best values.")


def figure(trials: pd.DataFrame, path: Path) -> Path | None:
    """Validation top-1 of each trial against its value of the first searched key,
    one panel per dataset x model, one series per variant."""
    from matplotlib import ticker
    from matplotlib.lines import Line2D

    from ablation.report.figures import MARKERS, VARIANT_COLORS, dodge, grid, save_figure
    from ablation.report.tables import VARIANTS

    done = trials[trials["status"] == "completed"]
    if done.empty:
        return None
    order = list(VARIANTS.values())
    groups = list(done.groupby(["dataset", "model"], sort=True))
    fig, axes = grid(len(groups))
    for ax, ((dataset, model), block) in zip(axes, groups):
        key = block["params"].iloc[0][0]
        values = block["values"].map(lambda v, k=key: v.get(k, np.nan)).to_numpy(dtype=float)
        logs = np.log10(values[np.isfinite(values) & (values > 0)])
        span = max(float(np.ptp(logs)) if len(logs) else 0.0, 1.0)
        labels = sorted(set(block["label"]), key=order.index)
        for v, label in enumerate(labels):
            mine = block[block["label"] == label]
            x = mine["values"].map(lambda v, k=key: v.get(k, np.nan)).to_numpy(dtype=float)
            x = x * 10 ** dodge(v, len(labels), DODGE_SHARE * span)
            y = 100 * mine["objective"].to_numpy(dtype=float)
            style = {"color": VARIANT_COLORS[label], "marker": MARKERS[order.index(label)]}
            ranked = np.argsort(x)
            ax.plot(x[ranked], y[ranked], "-", alpha=0.7, label=label, markersize=5,
                    markerfacecolor="none", **style)
            best = int(np.nanargmax(y))
            ax.plot(x[best], y[best], linestyle="none", markersize=8, **style)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel(key)
        ax.set_ylabel("validation top-1 (%)")
        ax.set_title(f"{dataset} × {model}: trials per variant", fontsize=9)
        chosen = Line2D([], [], color="#333333", marker="o", linestyle="none", markersize=8,
                        label="chosen value (filled)")
        ax.legend(handles=[*ax.get_legend_handles_labels()[0], chosen], fontsize=7)
    return save_figure(fig, path, dpi=120)
