"""Power: what a block's seeds could have detected, so a null result means something.

For the paired t-test the table uses (two-sided, α 0.05, power 0.8): the smallest
top-1 gap the seeds could detect, and the seeds each observed gap would need.
Both plan with the LARGEST sd of the block's paired differences (the factorial
effects: of the per-seed effects), so a near-copy of the ViT (an inert switch)
cannot make the block look better powered than it is.
"""
from __future__ import annotations

import bisect
import math
import warnings

import numpy as np
import pandas as pd

from ablation.config.switches import BASELINE_LABEL

ALPHA, POWER = 0.05, 0.8
MIN_SEEDS, MAX_SEEDS = 2, 10_000


def power_at(effect: float, seeds: int) -> float:
    """The two-sided paired t-test's power to detect a standardised gap ``effect``
    with ``seeds`` pairs, as statsmodels' ``TTestPower.power`` computes it (the far
    lower tail, NaN from scipy for some large noncentralities, counts as 0)."""
    from scipy import stats

    df, nc = seeds - 1, effect * math.sqrt(seeds)
    critical = stats.t.isf(ALPHA / 2, df)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        upper = float(stats.nct.sf(critical, df, nc))
        lower = float(stats.nct.cdf(-critical, df, nc))
    return upper + (lower if np.isfinite(lower) else 0.0)


def detectable_effect(seeds: int) -> float:
    """Standardised gap (gap / sd) ``seeds`` pairs detect with power 0.8."""
    from scipy.optimize import brentq

    high = 1.0
    while power_at(high, seeds) < POWER:
        high *= 2
    return brentq(lambda effect: power_at(effect, seeds) - POWER, 0.0, high, rtol=1e-10)


def seeds_needed(gap: float, sd: float) -> float:
    """Seeds (pairs) a paired t-test needs to detect ``gap`` with power 0.8; NaN
    with no gap or no spread, inf beyond :data:`MAX_SEEDS` (an integer search:
    ``solve_power``'s root finder fails between 2 and 3 seeds)."""
    if not (np.isfinite(gap) and np.isfinite(sd)) or gap == 0 or sd <= 0:
        return np.nan
    seeds = range(MIN_SEEDS, MAX_SEEDS + 1)
    first = bisect.bisect_left(seeds, True, key=lambda n: power_at(abs(gap) / sd, n) >= POWER)
    return float(seeds[first]) if first < len(seeds) else math.inf


def add_power(block: pd.DataFrame) -> pd.DataFrame:
    """The block's rows with the power columns (top-1): ``top1_detectable_gap`` (pp),
    ``top1_power_seeds``, ``top1_power_sd`` and ``top1_seeds_needed`` (per row)."""
    block = block.copy()
    rows = block[(block["pairs"] >= 2) & np.isfinite(block["d_top1_sd"].astype(float))]
    sd, seeds = ((np.nan, 0) if rows.empty else
                 (float(rows["d_top1_sd"].astype(float).max()), int(rows["pairs"].min())))
    has_spread = np.isfinite(sd) and sd > 0
    block["top1_power_sd"] = sd
    block["top1_power_seeds"] = seeds if seeds else np.nan
    block["top1_detectable_gap"] = detectable_effect(seeds) * sd if has_spread else np.nan
    block["top1_seeds_needed"] = [seeds_needed(g, sd) if has_spread else np.nan
                                  for g in block["d_top1"].astype(float)]
    return block


def sentence(block: pd.DataFrame) -> str | None:
    """The caption's power sentence for one block, or None with nothing to say."""
    first = block.iloc[0]
    seeds, sd = float(first.get("top1_power_seeds")), float(first.get("top1_power_sd"))
    if not np.isfinite(seeds):
        return None
    if not (np.isfinite(sd) and sd > 0):
        return ("Power: the paired top-1 differences have no spread, so the smallest "
                "detectable gap cannot be estimated.")
    needs = []
    for _, r in block.iterrows():
        n = r["top1_seeds_needed"]
        if r["variant"] == BASELINE_LABEL or not np.isfinite(r["d_top1"]):
            continue
        text = "more than 10,000" if n == math.inf else "—" if not np.isfinite(n) else f"{n:.0f}"
        needs.append(f"{r['variant']} {text}")
    return (f"Power (paired t, α {ALPHA:g}, power {POWER:g}, planned with the largest sd of "
            f"the block's paired top-1 differences, {sd:.2f} pp): with {int(seeds)} seeds the "
            f"smallest detectable top-1 gap is {first['top1_detectable_gap']:.2f} pp; seeds "
            f"needed to detect each observed gap: " + ", ".join(needs) + ".")


def factorial_sentence(effects: pd.DataFrame) -> str | None:
    """The power line under one block's top-1 factorial effects (one-sample t-tests
    over the seeds), or None with nothing to say."""
    seeds = int(effects["seeds"].iloc[0]) if len(effects) else 0
    sd = effects["top1_sd"].to_numpy(dtype=float)
    if seeds < MIN_SEEDS or not np.isfinite(sd).all():
        return None
    largest = float(sd.max())
    if largest <= 0:
        return ("Power: the per-seed top-1 effects have no spread, so the smallest "
                "detectable effect cannot be estimated.")
    return (f"Power (t over seeds, α {ALPHA:g}, power {POWER:g}, planned with the largest sd "
            f"of the per-seed top-1 effects, {largest:.2f} pp): with {seeds} seeds the "
            f"smallest detectable top-1 effect is {detectable_effect(seeds) * largest:.2f} pp.")
