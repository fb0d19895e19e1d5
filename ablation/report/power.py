"""Power: what a block's seeds could have detected, so a null result means something.

For the paired t-test the table uses (two-sided, α 0.05), with power 0.8:
the smallest top-1 gap the block's seeds could detect, and the seeds the
observed gap of each variant would need (the paired t-test's power from the
noncentral t, as statsmodels' ``TTestPower`` defines it). Both plan with the
LARGEST sd of the block's paired differences, its noisiest comparison, so the
seeds planned suffice for
every row, and a row that is a near-copy of the plain ViT (an inert switch:
its differences barely vary) cannot make the block look better powered than it
is; pooling the rows would let such copies shrink the sd. The factorial
effects are t-tests over the seeds too: their line plans with the largest sd
of the per-seed effects over the block's terms.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from ablation.config.switches import BASELINE_LABEL

ALPHA, POWER = 0.05, 0.8
MIN_SEEDS, MAX_SEEDS = 2, 10_000


def power_at(effect: float, seeds: int) -> float:
    """The two-sided paired t-test's power to detect a standardised gap ``effect``
    (>= 0) with ``seeds`` pairs: P(|T| > t_crit) for T noncentral t with n - 1 df
    and noncentrality effect * sqrt(n), what ``TTestPower.power`` computes; its far
    lower tail, which scipy returns as NaN for some large noncentralities, is
    below 1e-10 there and counts as 0."""
    from scipy import stats

    df, nc = seeds - 1, effect * math.sqrt(seeds)
    critical = stats.t.isf(ALPHA / 2, df)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        upper = float(stats.nct.sf(critical, df, nc))
        lower = float(stats.nct.cdf(-critical, df, nc))
    return upper + (lower if np.isfinite(lower) else 0.0)


def detectable_effect(seeds: int) -> float:
    """Standardised gap (gap / sd of the paired differences) ``seeds`` pairs detect
    with power 0.8: :func:`power_at` solved by bisection (it rises with the gap)."""
    low, high = 0.0, 1.0
    while power_at(high, seeds) < POWER:
        high *= 2
    while high - low > 1e-10 * high:
        mid = (low + high) / 2
        low, high = (low, mid) if power_at(mid, seeds) >= POWER else (mid, high)
    return high


def seeds_needed(gap: float, sd: float) -> float:
    """Seeds (pairs) a paired t-test needs to detect ``gap`` with power 0.8; NaN
    when there is no gap or no spread to plan with, inf beyond :data:`MAX_SEEDS`.

    An integer search on the power itself (which rises with the seeds): the
    root finder of ``solve_power`` fails to converge between 2 and 3 seeds."""
    if not (np.isfinite(gap) and np.isfinite(sd)) or gap == 0 or sd <= 0:
        return np.nan
    effect = abs(gap) / sd
    if power_at(effect, MIN_SEEDS) >= POWER:
        return float(MIN_SEEDS)
    if power_at(effect, MAX_SEEDS) < POWER:
        return math.inf
    low, high = MIN_SEEDS, MAX_SEEDS  # power(low) < POWER <= power(high)
    while high - low > 1:
        mid = (low + high) // 2
        if power_at(effect, mid) >= POWER:
            high = mid
        else:
            low = mid
    return float(high)


def planning_sd(block: pd.DataFrame, metric: str = "top1") -> tuple[float, int]:
    """The largest sd of the block's paired differences and the smallest pair count."""
    rows = block[(block["pairs"] >= 2) & np.isfinite(block[f"d_{metric}_sd"].astype(float))]
    if rows.empty:
        return np.nan, 0
    return float(rows[f"d_{metric}_sd"].astype(float).max()), int(rows["pairs"].min())


def add_power(block: pd.DataFrame) -> pd.DataFrame:
    """The block's rows with the power columns (top-1): ``top1_detectable_gap`` (pp,
    the same in every row of the block), ``top1_power_seeds`` (the seeds it assumes),
    ``top1_power_sd`` and ``top1_seeds_needed`` (for each row's observed gap)."""
    block = block.copy()
    sd, seeds = planning_sd(block)
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


def factorial_sentence(effects: pd.DataFrame, metric: str = "top1") -> str | None:
    """The power line under one block's factorial effects, or None with nothing to say.

    Each effect is a one-sample t-test over the seeds' own effects, so the
    detectable effect is the paired one's: the standardised size ``seeds`` values
    detect, times the largest sd of the per-seed effects over the block's terms.
    """
    seeds = int(effects["seeds"].iloc[0]) if len(effects) else 0
    sd = effects[f"{metric}_sd"].to_numpy(dtype=float)
    if seeds < MIN_SEEDS or not np.isfinite(sd).all():
        return None
    largest = float(sd.max())
    name = {"top1": "top-1", "top5": "top-5"}.get(metric, metric)
    if largest <= 0:
        return (f"Power: the per-seed {name} effects have no spread, so the smallest "
                "detectable effect cannot be estimated.")
    return (f"Power (t over seeds, α {ALPHA:g}, power {POWER:g}, planned with the largest sd "
            f"of the per-seed {name} effects, {largest:.2f} pp): with {seeds} seeds the "
            f"smallest detectable {name} effect is {detectable_effect(seeds) * largest:.2f} pp.")
