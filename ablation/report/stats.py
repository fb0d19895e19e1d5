"""The two statistics the report prints: paired gaps and factorial effects.

Both lean on maintained libraries (scipy's bootstrap, statsmodels' OLS)
rather than hand-rolled formulas, and both are reproducible: the bootstrap
has a fixed random state.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95


def paired_gap(values: pd.Series, baseline: pd.Series) -> dict:
    """Mean of ``values - baseline`` over the seeds both have, with a 95 % CI.

    Both series are indexed by seed. The interval is a percentile bootstrap
    of the mean paired difference (fixed random state), given when at least
    two seeds pair up; with one, only the difference is returned.
    """
    seeds = values.index.intersection(baseline.index)
    diffs = (values.loc[seeds] - baseline.loc[seeds]).to_numpy(dtype=float)
    out = {"gap": float(diffs.mean()) if len(diffs) else np.nan, "pairs": len(diffs),
           "low": np.nan, "high": np.nan}
    if len(diffs) >= 2:
        if np.all(diffs == diffs[0]):  # no spread: every resample has the same mean
            out["low"] = out["high"] = float(diffs[0])
        else:
            from scipy.stats import bootstrap

            ci = bootstrap((diffs,), np.mean, confidence_level=CONFIDENCE,
                           n_resamples=BOOTSTRAP_RESAMPLES, method="percentile",
                           random_state=np.random.default_rng(BOOTSTRAP_SEED)).confidence_interval
            out["low"], out["high"] = float(ci.low), float(ci.high)
    return out


def effect_terms(factors: Sequence[str]) -> list[tuple[str, ...]]:
    """Main effects, then two-way, then three-way interactions."""
    from itertools import combinations

    return [c for k in range(1, len(factors) + 1) for c in combinations(factors, k)]


def factorial_effects(runs: pd.DataFrame, factors: Sequence[str], metric: str) -> pd.DataFrame:
    """Effects of the switches on ``metric`` from a full factorial, with 95 % CIs.

    Ordinary least squares on +-1 coded switches with every interaction, and
    the seed as a block (a fixed effect) when several seeds are present. The
    effect of a term is twice its coefficient: the change in the metric when
    the switch goes from off to on, averaged over the other switches. With no
    residual degrees of freedom (one seed per cell) the effects are exact and
    the intervals are left empty.
    """
    import statsmodels.formula.api as smf

    data = pd.DataFrame({f: np.where(runs[f].astype(bool), 1.0, -1.0) for f in factors})
    data["y"] = runs[metric].to_numpy(dtype=float)
    data["seed"] = runs["seed"].astype(str).to_numpy()
    formula = "y ~ " + " * ".join(factors)
    if data["seed"].nunique() > 1:
        formula += " + C(seed, Sum)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zero residual df warns; handled below
        fit = smf.ols(formula, data=data).fit()
        intervals = fit.conf_int(alpha=1 - CONFIDENCE) if fit.df_resid > 0 else None
    rows = []
    for term in effect_terms(factors):
        name = ":".join(term)
        coef = fit.params[name]
        low = high = np.nan
        if intervals is not None:
            low, high = 2 * intervals.loc[name, 0], 2 * intervals.loc[name, 1]
        rows.append({"term": " x ".join(term), "order": len(term), "effect": 2 * coef,
                     "low": low, "high": high,
                     "p_value": fit.pvalues[name] if intervals is not None else np.nan})
    return pd.DataFrame(rows)
