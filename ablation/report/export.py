"""The tables as CSV, at the precision the test set supports: a block's accuracies
are means over n seeds of k/N correct images, so two significant digits of the
step 100/(N n) are printed (``2.5``, not float32's ``2.499997615814209``), and the
exact counts stand beside them. Every CSV goes through
:func:`ablation.report.escape.csv_text`.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ablation.report.escape import csv_text
from ablation.report.tables import BLOCK

UNKNOWN_SIZE_DECIMALS = 4  # older records without the test-set size
# comparison / effects columns in percentage points
POINTS = ("top1_mean", "top1_std", "top5_mean", "top5_std", "best_top1_mean", "best_top1_std",
          "best_top5_mean", "best_top5_std", "top1_power_sd", "top1_detectable_gap")
GAP_SUFFIXES = ("", "_low", "_high", "_sd")
EFFECT_COLUMNS = ("effect", "low", "high")


def decimals(test_images: float, seeds: float) -> int:
    """Decimals for a block's percentages: two significant digits of 100 / (N n)."""
    if not (np.isfinite(test_images) and test_images > 0):
        return UNKNOWN_SIZE_DECIMALS
    step = 100.0 / (float(test_images) * max(float(seeds) if np.isfinite(seeds) else 1.0, 1.0))
    return max(2, math.ceil(-math.log10(step)) + 1)


def _block_decimals(table: pd.DataFrame) -> dict[tuple, int]:
    """Each block's decimals; its test-set size is one per block (comparison())."""
    return {tuple(key): decimals(block["test_images"].iloc[0], block["n"].max())
            for key, block in table.groupby(BLOCK, sort=False, dropna=False)}


def _round(frame: pd.DataFrame, columns, places: dict[tuple, int]) -> pd.DataFrame:
    frame = frame.copy()
    keys = list(zip(*(frame[c] for c in BLOCK)))
    for col in columns:
        values = frame[col].astype(float)
        frame[col] = [round(v, places.get(k, UNKNOWN_SIZE_DECIMALS)) if np.isfinite(v) else v
                      for v, k in zip(values, keys)]
    return frame


def comparison_csv(table: pd.DataFrame) -> str:
    """``comparison.csv``: percentages rounded per block, counts and times plain."""
    gaps = [f"d_{m}{s}" for m in ("top1", "top5") for s in GAP_SUFFIXES]
    out = _round(table, [*POINTS, *gaps], _block_decimals(table))
    for col in ("tuned_values", "tuning", "final_seeds"):  # a tuned block's search, as JSON
        out[col] = out[col].map(lambda v: "" if v is None or v is np.nan
                                else json.dumps(v, sort_keys=True))
    for col, places in (("images_per_s", 1), ("train_seconds", 2), ("top1_correct", 6),
                        ("top5_correct", 6), ("d_top1_images", 6), ("d_top5_images", 6)):
        out[col] = out[col].astype(float).round(places)
    return csv_text(out)


def effects_csv(effects: pd.DataFrame, table: pd.DataFrame) -> str:
    """``factorial_effects.csv``: effects and bounds at their block's precision."""
    columns = [f"{m}_{c}" for m in ("top1", "top5") for c in EFFECT_COLUMNS]
    return csv_text(_round(effects, columns, _block_decimals(table)))
