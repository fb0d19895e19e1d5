"""The two statistics the report prints: paired gaps and factorial effects.

Both take the seed as the experimental unit: a seed fixes the initialisation,
the data order and every augmentation draw for all variants, so the variants of
one seed are not independent runs. A gap or an effect is computed within each
seed and its interval is the Student t-interval over the seeds (n - 1 df); with
a handful of seeds a bootstrap of the per-seed values is only their range.
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations, product

import numpy as np
import pandas as pd

CONFIDENCE = 0.95
SPREAD_TOLERANCE_PP = 1e-4  # one image of a 1,000,000-image test set


def seed_interval(diffs) -> dict:
    """Mean of per-seed values (differences or effects) with its 95 % t-interval
    (two seeds or more); identical values have none: a zero-wide interval, ``no_spread``."""
    diffs = np.asarray(diffs, dtype=float)
    out = {"gap": float(diffs.mean()) if len(diffs) else np.nan, "pairs": len(diffs),
           "low": np.nan, "high": np.nan, "no_spread": False, "p": np.nan,
           "sd": float(diffs.std(ddof=1)) if len(diffs) >= 2 else np.nan}
    if len(diffs) >= 2:
        # float32 accuracies: the same gap in every seed differs by round-off, which
        # an exact test would call a hair-wide, "significant" interval
        if np.ptp(diffs) < SPREAD_TOLERANCE_PP:  # sd = 0: scipy would return NaN bounds
            out["low"] = out["high"] = float(diffs.mean())
            out["no_spread"], out["sd"] = True, 0.0
        else:
            from scipy.stats import ttest_1samp

            test = ttest_1samp(diffs, 0.0)
            ci = test.confidence_interval(confidence_level=CONFIDENCE)
            out["low"], out["high"], out["p"] = float(ci.low), float(ci.high), float(test.pvalue)
    return out


def paired_gap(values: pd.Series, baseline: pd.Series) -> dict:
    """Mean of ``values - baseline`` (both indexed by seed) over the seeds both have,
    with its paired 95 % t-interval (:func:`seed_interval`)."""
    seeds = values.index.intersection(baseline.index)
    v = values.loc[seeds].to_numpy(dtype=float)
    b = baseline.loc[seeds].to_numpy(dtype=float)
    out = seed_interval(v - b)
    # an exact-zero mean gap comes out as 3.55e-15 from the round-off of v - b
    scale = float(np.max(np.abs(np.concatenate([v, b])))) if len(v) else 1.0
    for key in ("gap", "low", "high"):
        out[key] = clean_zero(out[key], scale)
    return out


def holm(p_values) -> np.ndarray:
    """Holm-adjusted p-values of one family of tests (NaN: no test, not counted), as
    statsmodels' ``multipletests(method="holm")`` gives them, without the full
    garbage collection it runs on every call."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    tested = np.flatnonzero(np.isfinite(p))
    if tested.size:
        order = tested[np.argsort(p[tested], kind="stable")]
        factors = np.arange(order.size, 0, -1)
        out[order] = np.minimum(np.maximum.accumulate(p[order] * factors), 1.0)
    return out


def clean_zero(x: float, scale: float = 1.0) -> float:
    """0.0 for a value that is zero up to floating-point round-off, which printed
    would look like a measurement."""
    return 0.0 if np.isfinite(x) and abs(x) < 1e-9 * max(abs(scale), 1.0) else x


def effect_terms(factors: Sequence[str]) -> list[tuple[str, ...]]:
    """Main effects, then two-way, then three-way interactions."""
    return [c for k in range(1, len(factors) + 1) for c in combinations(factors, k)]


def complete_seeds(runs: pd.DataFrame, factors: Sequence[str]) -> list:
    """The seeds whose runs hold every cell of the 2^k factorial over ``factors``: in
    any other seed the switches are confounded with the seed."""
    cells = 2 ** len(factors)
    keys = runs[list(factors)].astype(bool).apply(tuple, axis=1)
    per_seed = keys.groupby(runs["seed"]).nunique()
    return sorted(per_seed[per_seed == cells].index)


def contrasts(factors: Sequence[str]) -> tuple[list[tuple[bool, ...]], dict]:
    """The 2^k cells of the design and each term's +-1 contrast over them (the
    product of its switches' codes; effect = contrast @ y / 2^(k-1))."""
    cells = list(product((False, True), repeat=len(factors)))
    codes = np.array([[1.0 if on else -1.0 for on in cell] for cell in cells])
    index = {f: i for i, f in enumerate(factors)}
    return cells, {term: np.prod(codes[:, [index[f] for f in term]], axis=1)
                   for term in effect_terms(factors)}


def seed_effects(runs: pd.DataFrame, factors: Sequence[str], metric: str,
                 seeds: Sequence) -> pd.DataFrame:
    """Every term's effect within each of ``seeds`` (one row per seed, one column per
    term), a cell run twice in a seed averaged."""
    cells, terms = contrasts(factors)
    runs = runs[runs["seed"].isin(seeds)]
    cell_of = {cell: i for i, cell in enumerate(cells)}
    cell = [cell_of[tuple(bool(v) for v in row)] for row in runs[list(factors)].to_numpy()]
    means = (pd.DataFrame({"seed": runs["seed"].to_numpy(), "cell": cell,
                           "y": runs[metric].to_numpy(dtype=float)})
             .groupby(["seed", "cell"])["y"].mean().unstack("cell"))
    rows = {}
    for seed in seeds:
        y = means.loc[seed, list(range(len(cells)))].to_numpy(dtype=float)
        rows[seed] = {" x ".join(t): float(c @ y) / 2 ** (len(factors) - 1)
                      for t, c in terms.items()}
    return pd.DataFrame.from_dict(rows, orient="index")


def factorial_effects(runs: pd.DataFrame, factors: Sequence[str],
                      metric: str) -> pd.DataFrame | None:
    """Effects of the switches on ``metric`` from a full factorial, with 95 % CIs.

    Each effect is computed within each complete seed and its interval is the
    t-interval over the seeds, each effect tested against its own seed-by-effect
    variation: a residual pooled over the variants of one seed would count
    near-copies of a run (an inert switch on and off) as evidence. ``p_holm``
    adjusts across the block's terms; ``seeds`` counts the seeds used; None when no
    seed holds every cell.
    """
    runs = runs[np.isfinite(runs[metric].to_numpy(dtype=float))]  # a run without it
    seeds = complete_seeds(runs, factors)
    if not seeds:
        return None
    per_seed = seed_effects(runs, factors, metric, seeds)
    scale = float(np.nanmax(np.abs(runs[metric].to_numpy(dtype=float))))
    rows = []
    for term in effect_terms(factors):
        name = " x ".join(term)
        est = seed_interval(per_seed[name].to_numpy())
        rows.append({"term": name, "order": len(term), "effect": clean_zero(est["gap"], scale),
                     "low": clean_zero(est["low"], scale), "high": clean_zero(est["high"], scale),
                     "p_value": est["p"], "sd": est["sd"], "no_spread": est["no_spread"],
                     "seeds": len(per_seed)})
    out = pd.DataFrame(rows)
    out["p_holm"] = holm(out["p_value"])
    return out
