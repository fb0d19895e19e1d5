"""The two statistics the report prints: paired gaps and factorial effects.

Both lean on maintained libraries (scipy's t-test, statsmodels' OLS)
rather than hand-rolled formulas; Holm's adjustment is computed here, tied
to statsmodels' by a test. Sweeps have 2-5 seeds: at that size a
percentile bootstrap of the paired differences is just their range (about
50 % coverage at n = 2, 75 % at n = 3), while the paired Student t-interval
with n - 1 degrees of freedom keeps its nominal 95 % coverage (assuming
roughly normal differences), so that is what the gaps use.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

CONFIDENCE = 0.95


SPREAD_TOLERANCE_PP = 1e-4  # one image of a 1,000,000-image test set


def paired_gap(values: pd.Series, baseline: pd.Series) -> dict:
    """Mean of ``values - baseline`` over the seeds both have, with a 95 % t-interval.

    Both series are indexed by seed. The interval is the paired Student
    t-interval, mean +- t(0.975, n-1) * sd / sqrt(n) of the differences
    (``scipy.stats.ttest_rel(...).confidence_interval()``), given when at least
    two seeds pair up. Identical differences have no spread: the interval is
    zero-wide and ``no_spread`` says so (the caption must, too).
    """
    seeds = values.index.intersection(baseline.index)
    v = values.loc[seeds].to_numpy(dtype=float)
    b = baseline.loc[seeds].to_numpy(dtype=float)
    diffs = v - b
    out = {"gap": float(diffs.mean()) if len(diffs) else np.nan, "pairs": len(diffs),
           "low": np.nan, "high": np.nan, "no_spread": False, "p": np.nan,
           "sd": float(diffs.std(ddof=1)) if len(diffs) >= 2 else np.nan}
    if len(diffs) >= 2:
        # Records hold float32 accuracies: the same gap in images in every seed
        # differs by ~1e-6 pp between seeds, and an exact test would give a
        # hair-wide, "significant" interval. Below SPREAD_TOLERANCE_PP (far less
        # than one image of any test set this tool reads) the spread is none.
        if np.ptp(diffs) < SPREAD_TOLERANCE_PP:  # sd = 0: scipy would return NaN bounds
            out["low"] = out["high"] = float(diffs.mean())
            out["no_spread"], out["sd"] = True, 0.0
        else:
            from scipy.stats import ttest_rel

            test = ttest_rel(v, b)
            ci = test.confidence_interval(confidence_level=CONFIDENCE)
            out["low"], out["high"], out["p"] = float(ci.low), float(ci.high), float(test.pvalue)
    # an exact-zero mean gap comes out as 3.55e-15 from the round-off of v - b
    scale = float(np.max(np.abs(np.concatenate([v, b])))) if len(diffs) else 1.0
    for key in ("gap", "low", "high"):
        out[key] = clean_zero(out[key], scale)
    return out


def holm(p_values) -> np.ndarray:
    """Holm-adjusted p-values of one family of tests.

    A block's Δ rows are one family per metric: with seven variants against the
    ViT, seven tests, and an uncorrected 5 % threshold would flag a gap by
    chance far more often than one time in twenty. NaN p-values (no test: one
    seed, no spread) stay NaN and do not count towards the family's size.

    Holm's step-down, as statsmodels' ``multipletests(method="holm")`` computes
    it (a test ties the two): the k-th smallest of m p-values times
    ``m - k + 1``, made non-decreasing in that order, capped at 1. Computed
    here because statsmodels runs a full garbage collection on every call,
    which is costly in a process holding a trained model's graphs.
    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    tested = np.flatnonzero(np.isfinite(p))
    if tested.size:
        order = tested[np.argsort(p[tested], kind="stable")]
        factors = np.arange(order.size, 0, -1)
        out[order] = np.minimum(np.maximum.accumulate(p[order] * factors), 1.0)
    return out


def excludes_zero(low: float, high: float) -> bool:
    """An interval that lies entirely above or below zero (NaN bounds: no)."""
    return bool(np.isfinite(low) and np.isfinite(high) and (low > 0 or high < 0))


def clean_zero(x: float, scale: float = 1.0) -> float:
    """0.0 for a value that is zero up to floating-point round-off (``2.84e-14``).

    OLS on exact data returns coefficients of order 1e-14 for an effect that is
    exactly zero; printed, they look like a measurement.
    """
    return 0.0 if np.isfinite(x) and abs(x) < 1e-9 * max(abs(scale), 1.0) else x


def effect_terms(factors: Sequence[str]) -> list[tuple[str, ...]]:
    """Main effects, then two-way, then three-way interactions."""
    from itertools import combinations

    return [c for k in range(1, len(factors) + 1) for c in combinations(factors, k)]


def complete_seeds(runs: pd.DataFrame, factors: Sequence[str]) -> list:
    """The seeds whose runs hold every cell of the 2^k factorial over ``factors``.

    Only these can be fitted with the seed as a block: a seed that lacks a cell
    is confounded with the switches (ViT run with seed 1, the others with seed
    0), and OLS would return numbers for effects that the data cannot separate
    from the seed.
    """
    cells = 2 ** len(factors)
    keys = runs[list(factors)].astype(bool).apply(tuple, axis=1)
    per_seed = keys.groupby(runs["seed"]).nunique()
    return sorted(per_seed[per_seed == cells].index)


def factorial_effects(runs: pd.DataFrame, factors: Sequence[str],
                      metric: str) -> pd.DataFrame | None:
    """Effects of the switches on ``metric`` from a full factorial, with 95 % CIs.

    Ordinary least squares on +-1 coded switches with every interaction, and
    the seed as a block (a fixed effect) when several seeds are present. The
    effect of a term is twice its coefficient: the change in the metric when
    the switch goes from off to on, averaged over the other switches. With no
    residual degrees of freedom (one seed per cell) the effects are exact and
    the intervals are left empty.

    Only the seeds that hold the full factorial are fitted (see
    :func:`complete_seeds`); when no seed does, or the design matrix is still
    rank-deficient, the effects are not estimable and None is returned:
    effects are estimable or absent, never numbers statsmodels made up.
    The column ``seeds`` counts the seeds fitted.
    """
    import statsmodels.formula.api as smf

    runs = runs[np.isfinite(runs[metric].to_numpy(dtype=float))]  # a run without it
    seeds = complete_seeds(runs, factors)
    if not seeds:
        return None
    runs = runs[runs["seed"].isin(seeds)]
    data = pd.DataFrame({f: np.where(runs[f].astype(bool), 1.0, -1.0) for f in factors})
    data["y"] = runs[metric].to_numpy(dtype=float)
    data["seed"] = runs["seed"].astype(str).to_numpy()
    formula = "y ~ " + " * ".join(factors)
    if data["seed"].nunique() > 1:
        formula += " + C(seed, Sum)"
    model = smf.ols(formula, data=data)
    if np.linalg.matrix_rank(model.exog) < model.exog.shape[1]:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zero residual df warns; handled below
        fit = model.fit()
        intervals = fit.conf_int(alpha=1 - CONFIDENCE) if fit.df_resid > 0 else None
    scale = float(np.nanmax(np.abs(data["y"]))) if len(data) else 1.0
    rows = []
    for term in effect_terms(factors):
        name = ":".join(term)
        coef = fit.params[name]
        low = high = np.nan
        if intervals is not None:
            low, high = (clean_zero(2 * intervals.loc[name, i], scale) for i in (0, 1))
        rows.append({"term": " x ".join(term), "order": len(term),
                     "effect": clean_zero(2 * coef, scale),
                     "low": low, "high": high,
                     "p_value": fit.pvalues[name] if intervals is not None else np.nan,
                     "seeds": len(seeds)})
    return pd.DataFrame(rows)
