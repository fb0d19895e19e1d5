"""The factorial effects take the seed as the unit, as the paired gaps do.

Variants of one seed share its initialisation, data order and augmentation
draws, so they are not independent runs: an interval that pools them as
replicates narrows when near-copies of a run are added. These tests check the
effects' intervals against that (an inert switch's copies), against their
nominal coverage on simulated sweeps at the seed counts users run, and on the
committed real Fashion-MNIST sweep.
"""
from itertools import product

import numpy as np
import pandas as pd
import pytest

from ablation.report import factorial, load_runs, write_report
from ablation.report.stats import factorial_effects
from tests.helpers.paths import ROOT
from tests.helpers.records import record

FACTORS = ["spt", "lsa", "learnable_temperature"]


def widths(effects: pd.DataFrame, metric: str = "top1") -> pd.Series:
    effects = effects.set_index("term")
    return effects[f"{metric}_high"] - effects[f"{metric}_low"]


def four_variants(tmp_path, copies: bool):
    """The paper's four variants at seeds 0 and 1 (temperature tied to the mask), and
    with ``copies`` the other four variants as exact copies of their temperature twin:
    the temperature is inert, its runs carry no new information."""
    top1 = {(False, False): (0.9417, 0.9306), (True, False): (0.9611, 0.9583),
            (False, True): (0.9444, 0.9472), (True, True): (0.9611, 0.9611)}
    for (spt, lsa), values in top1.items():
        for seed, value in enumerate(values):
            record(tmp_path, spt, lsa, lsa, seed, value)
            if copies:
                record(tmp_path, spt, lsa, not lsa, seed, value)
    return factorial(load_runs(tmp_path))


def test_an_inert_switchs_copies_leave_every_interval_as_it_was(tmp_path):
    tied = four_variants(tmp_path / "four", copies=False)
    full = four_variants(tmp_path / "eight", copies=True)
    assert len(tied) == 3 and len(full) == 7
    names = {"SPT": "SPT", "LSA (mask + temp.)": "LSA mask",
             "SPT x LSA (mask + temp.)": "SPT x LSA mask"}
    for metric in ("top1", "top5"):
        before, after = widths(tied, metric), widths(full, metric)
        for four, eight in names.items():
            assert after[eight] == pytest.approx(before[four], abs=1e-9), (metric, eight)
    # the temperature's terms are exactly zero in every seed: no spread, no test
    temp = full.set_index("term").loc["Temp."]
    assert temp["top1_effect"] == 0 and temp["top1_no_spread"] and np.isnan(temp["top1_p_value"])


def test_the_committed_sweeps_temperature_copies_do_not_narrow_its_intervals():
    # Real runs: the learnable temperature changed top-1 by at most 0.03 pp per
    # (spt, lsa, seed), so the 24-run fit holds little more than the 12
    # temperature-off runs; a residual pooled over both narrowed SPT's interval.
    runs = load_runs(ROOT / "results" / "examples" / "fashion_mnist")
    runs = runs[runs["status"] == "completed"].assign(y=lambda r: 100 * r["test_top1"])
    assert len(runs) == 24
    off = runs[~runs["learnable_temperature"].astype(bool)]
    all24 = widths(factorial_effects(runs, FACTORS, "y").rename(columns=lambda c: f"top1_{c}"
                                                                  if c != "term" else c))
    off12 = widths(factorial_effects(off, ["spt", "lsa"], "y").rename(
        columns=lambda c: f"top1_{c}" if c != "term" else c))
    for term in ("spt", "lsa", "spt x lsa"):
        assert all24[term] >= 0.95 * off12[term], term


def simulated_sweep(rng, seeds: int, truth: dict, spread: dict) -> pd.DataFrame:
    """A 2^3 sweep where the variants of one seed are correlated: a seed offset shared by
    every variant, and each term's effect varying from seed to seed by its own sd (large
    for SPT, none for the temperature), plus a little run-to-run noise."""
    rows = []
    for seed in range(seeds):
        offset = rng.normal(0, 2.0)
        this_seed = {t: truth[t] + rng.normal(0, spread[t]) for t in truth}
        for cell in product((False, True), repeat=3):
            code = dict(zip(FACTORS, (1.0 if on else -1.0 for on in cell)))
            y = 80 + offset + rng.normal(0, 0.02)
            for term, effect in this_seed.items():
                y += effect / 2 * np.prod([code[f] for f in term.split(" x ")])
            rows.append({**dict(zip(FACTORS, cell)), "seed": seed, "y": y})
    return pd.DataFrame(rows)


TRUTH = {"spt": 1.0, "lsa": -0.2, "learnable_temperature": 0.0, "spt x lsa": 0.1,
         "spt x learnable_temperature": 0.0, "lsa x learnable_temperature": 0.0,
         "spt x lsa x learnable_temperature": 0.0}
SPREAD = {"spt": 0.8, "lsa": 0.4, "learnable_temperature": 0.01, "spt x lsa": 0.2,
          "spt x learnable_temperature": 0.01, "lsa x learnable_temperature": 0.01,
          "spt x lsa x learnable_temperature": 0.01}


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [2, 3, 5])
def test_intervals_cover_the_true_effect_at_their_nominal_rate(seeds):
    # Each simulated sweep gives 7 intervals, independent of each other (orthogonal
    # contrasts of independent draws); coverage over all of them must lie within two
    # standard errors of 95 %. A residual pooled over the terms covers SPT's effect far
    # less often here, since the temperature's terms barely vary between seeds.
    rng = np.random.default_rng(seeds)
    sweeps, hits = 500, []
    for _ in range(sweeps):
        effects = factorial_effects(simulated_sweep(rng, seeds, TRUTH, SPREAD), FACTORS, "y")
        effects = effects.set_index("term")
        truth = pd.Series(TRUTH)[effects.index]
        hits.append(((effects["low"] <= truth) & (truth <= effects["high"])).to_numpy())
    hits = np.array(hits)
    coverage, per_term = hits.mean(), hits.mean(axis=0)
    se = np.sqrt(0.95 * 0.05 / hits.size)
    assert abs(coverage - 0.95) <= 2 * se, (coverage, per_term)
    # and no term is far off on its own (a wide band: 500 sweeps per term)
    assert (np.abs(per_term - 0.95) <= 4 * np.sqrt(0.95 * 0.05 / sweeps)).all(), per_term


def test_holm_and_bold_follow_the_seed_unit(tmp_path):
    # SPT adds 3 +- 0.1 points in every seed; LSA adds nothing beyond noise
    rng = np.random.default_rng(1)
    for seed in range(4):
        base = 0.5 + rng.normal(0, 0.02)
        for spt, lsa in product((False, True), repeat=2):
            top1 = base + 0.03 * spt + 0.001 * rng.normal() * (1 + lsa)
            record(tmp_path, spt, lsa, lsa, seed, top1)
    report = write_report(tmp_path, make_plots=False)
    effects = report.effects.set_index("term")
    from statsmodels.stats.multitest import multipletests

    assert effects["top1_p_holm"].to_numpy() == pytest.approx(
        multipletests(effects["top1_p_value"], method="holm")[1])
    assert effects.loc["SPT", "top1_p_holm"] < 0.05
    assert effects.loc["LSA (mask + temp.)", "top1_p_holm"] > 0.05
    rows = report.markdown.split("Factorial effects")[1].splitlines()
    assert next(r for r in rows if r.startswith("| SPT |")).split(" | ")[1].startswith("**")
    assert "**" not in next(r for r in rows if r.startswith("| LSA (mask + temp.) |"))
    # power: the largest sd of the per-seed effects over the terms, t with n - 1 df
    from statsmodels.stats.power import TTestPower

    largest = float(effects["top1_sd"].max())
    d4 = TTestPower().solve_power(nobs=4, alpha=0.05, power=0.8, alternative="two-sided")
    assert f"with 4 seeds the smallest detectable top-1 effect is {d4 * largest:.2f} pp" in (
        report.markdown)
