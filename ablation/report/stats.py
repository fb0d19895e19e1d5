"""The two statistics the report prints: paired gaps and factorial effects.

Both take the seed as the experimental unit: a seed fixes the
initialisation, the data order and every augmentation and mixing draw for
all variants, so the variants of one seed are not independent runs. A gap
or an effect is computed within each seed and its interval is the Student
t-interval over the seeds (n - 1 degrees of freedom, scipy's t-test);
Holm's adjustment is computed here, tied to statsmodels' by a test. Sweeps
have 2-5 seeds: at that size a percentile bootstrap of the per-seed values
is just their range (about 50 % coverage at n = 2, 75 % at n = 3), while the
t-interval keeps its nominal 95 % coverage (assuming roughly normal
per-seed values), so that is what both use.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

CONFIDENCE = 0.95


SPREAD_TOLERANCE_PP = 1e-4  # one image of a 1,000,000-image test set


def seed_interval(diffs) -> dict:
    """Mean of per-seed values (differences or effects) with its 95 % t-interval.

    Each value comes from one seed, the experimental unit: the seed fixes the
    initialisation, the data order and every augmentation and mixing draw for all
    variants, so the seeds are the independent replicates and the interval is
    mean +- t(0.975, n-1) * sd / sqrt(n) (``scipy.stats.ttest_1samp``), given when
    there are at least two seeds. Identical values have no spread: the interval is
    zero-wide and ``no_spread`` says so (the caption must, too).
    """
    diffs = np.asarray(diffs, dtype=float)
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
            from scipy.stats import ttest_1samp

            test = ttest_1samp(diffs, 0.0)
            ci = test.confidence_interval(confidence_level=CONFIDENCE)
            out["low"], out["high"], out["p"] = float(ci.low), float(ci.high), float(test.pvalue)
    return out


def paired_gap(values: pd.Series, baseline: pd.Series) -> dict:
    """Mean of ``values - baseline`` over the seeds both have, with a 95 % t-interval.

    Both series are indexed by seed. The interval is the paired Student
    t-interval of the differences (:func:`seed_interval`; the same numbers as
    ``scipy.stats.ttest_rel(...).confidence_interval()``).
    """
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

    Only these give every effect within the seed: a seed that lacks a cell is
    confounded with the switches (ViT run with seed 1, the others with seed 0),
    and its "effects" would mix the switches with the seed.
    """
    cells = 2 ** len(factors)
    keys = runs[list(factors)].astype(bool).apply(tuple, axis=1)
    per_seed = keys.groupby(runs["seed"]).nunique()
    return sorted(per_seed[per_seed == cells].index)


def contrasts(factors: Sequence[str]) -> tuple[list[tuple[bool, ...]], dict]:
    """The 2^k cells of the design and each term's +-1 contrast over them.

    A term's contrast is the product of its switches' +-1 codes; its effect in
    one seed is ``contrast @ y / 2^(k-1)``: the mean of the metric where the
    contrast is +1 minus the mean where it is -1 (for a main effect, the change
    when the switch goes off -> on, averaged over the other switches).
    """
    from itertools import product

    cells = list(product((False, True), repeat=len(factors)))
    codes = np.array([[1.0 if on else -1.0 for on in cell] for cell in cells])
    index = {f: i for i, f in enumerate(factors)}
    return cells, {term: np.prod(codes[:, [index[f] for f in term]], axis=1)
                   for term in effect_terms(factors)}


def seed_effects(runs: pd.DataFrame, factors: Sequence[str], metric: str,
                 seeds: Sequence) -> pd.DataFrame:
    """Every term's effect within each of ``seeds`` (seeds that hold every cell:
    :func:`complete_seeds`): one row per seed, one column per term.

    The seed's runs of each cell are averaged (a cell run twice counts once), so
    each seed contributes one value per effect, whatever the number of runs.
    """
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

    The seed is the experimental unit. Each effect (main or interaction) is
    computed within each seed from that seed's complete 2^k cells
    (:func:`seed_effects`), and its interval is the Student t-interval over the
    seeds, n - 1 degrees of freedom (:func:`seed_interval`), as for the paired
    gaps. This is the randomised-block analysis with each effect tested against
    its own seed-by-effect variation, as a mixed model with a random seed-by-term
    term would test it: variants of one seed share the initialisation, the data
    order and every augmentation draw, so they are not independent replicates,
    and a residual pooled over them counts near-copies of a run as evidence (an
    inert switch, run on and off, would halve every interval's variance for
    nothing). Here it changes nothing: each seed's effect of the other switches
    is the same with or without the inert switch's copies.

    The point estimates equal the OLS coefficients (x 2) of ``y ~ switches + seed``
    on a balanced design. One seed gives effects with no interval. ``p_holm``
    adjusts the p-values across the block's terms (one family per metric);
    ``sd`` is the spread of the per-seed effects (the power line plans with it).
    Only the seeds that hold the full factorial count (see
    :func:`complete_seeds`); when none does, the effects are not estimable and
    None is returned. The column ``seeds`` counts the seeds used.
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
