"""The statistics (ablation/report/stats.py): factorial effects checked against a hand
computation, effects the design cannot estimate left out, exact zeros printed as zero,
and Holm's correction across a block's tests.

The factorial effects take the seed as the unit, as the paired gaps do.

Variants of one seed share its initialisation, data order and augmentation
draws, so they are not independent runs: an interval that pools them as
replicates narrows when near-copies of a run are added. These tests check the
effects' intervals against that (an inert switch's copies), against their
nominal coverage on simulated sweeps at the seed counts users run, and on the
committed real Fashion-MNIST sweep."""
import logging
from itertools import product

import numpy as np
import pandas as pd
import pytest

from ablation.report import comparison, factorial, load_runs, write_report
from ablation.report.stats import factorial_effects
from tests.helpers.paths import ROOT
from tests.helpers.records import TOP1, record
from tests.helpers.stats import t_interval_by_hand


def test_two_by_two_factorial_effects_match_a_hand_computation(four_by_three):
    effects = factorial(load_runs(four_by_three)).set_index("term")
    y = {k: 100 * np.array(v) for k, v in TOP1.items()}
    spt_effect = (y[True, False] + y[True, True] - y[False, False] - y[False, True]).mean() / 2
    lsa_effect = (y[False, True] + y[True, True] - y[False, False] - y[True, False]).mean() / 2
    inter = (y[True, True] + y[False, False] - y[True, False] - y[False, True]).mean() / 2
    assert list(effects.index) == ["SPT", "LSA (mask + temp.)", "SPT x LSA (mask + temp.)"]
    assert effects.loc["SPT", "top1_effect"] == pytest.approx(spt_effect)
    assert effects.loc["LSA (mask + temp.)", "top1_effect"] == pytest.approx(lsa_effect)
    assert effects.loc["SPT x LSA (mask + temp.)", "top1_effect"] == pytest.approx(inter)
    # interval by hand: the effect within each seed, then the t-interval over seeds
    per_seed = (y[True, False] + y[True, True] - y[False, False] - y[False, True]) / 2
    low, high = t_interval_by_hand(per_seed)
    assert (effects.loc["SPT", "top1_low"], effects.loc["SPT", "top1_high"]) == pytest.approx(
        (low, high), abs=2e-3)


def test_full_two_cubed_factorial(tmp_path):
    rng = np.random.default_rng(0)
    truth = {"spt": 2.0, "lsa": 1.0, "learnable_temperature": 0.5}
    for spt, lsa, temp in product([False, True], repeat=3):
        for seed in (0, 1):
            top1 = 50 + sum(truth[k] / 2 * (1 if on else -1) for k, on in
                            zip(truth, (spt, lsa, temp))) + rng.normal(0, 0.1)
            record(tmp_path, spt, lsa, temp, seed, top1 / 100)
    runs = load_runs(tmp_path)
    table = comparison(runs)
    assert list(table["variant"]) == ["ViT", "SPT", "LSA mask", "Learnable temp.",
                                      "SPT + LSA mask", "SPT + temp.", "LSA (mask + temp.)",
                                      "SL-ViT"]
    effects = factorial(runs).set_index("term")
    assert len(effects) == 7 and effects["order"].tolist() == [1, 1, 1, 2, 2, 2, 3]
    assert effects.loc["SPT", "top1_effect"] == pytest.approx(2.0, abs=0.2)
    assert effects.loc["Temp.", "top1_effect"] == pytest.approx(0.5, abs=0.2)
    spt = effects.loc["SPT"]
    assert spt["top1_low"] < spt["top1_effect"] < spt["top1_high"]
    assert spt["top1_high"] - spt["top1_low"] < 1.0  # noise sd is 0.1 point


def test_exact_zero_effects_print_as_zero_and_one_seed_footnote_only_when_true(tmp_path):
    # one seed per cell; SPT adds exactly nothing: its effect is 0, not 2.84e-14
    for (spt, lsa), top1 in {(False, False): 0.5017, (True, False): 0.5017,
                             (False, True): 0.5329, (True, True): 0.5329}.items():
        record(tmp_path, spt, lsa, lsa, 0, top1)
    report = write_report(tmp_path, make_plots=False)
    effects = report.effects.set_index("term")
    assert effects.loc["SPT", "top1_effect"] == 0.0
    assert effects.loc["SPT x LSA (mask + temp.)", "top1_effect"] == 0.0
    assert "e-1" not in (tmp_path / "factorial_effects.csv").read_text()
    assert "No interval with one seed" in report.markdown


def test_effects_confounded_with_the_seed_are_left_out_with_a_note(tmp_path, caplog):
    # ViT only with seed 1, the other three only with seed 0: the switches cannot be
    # told apart from the seed, so OLS with seed blocks has no unique answer.
    for (spt, lsa), (top1, seed) in {(False, False): (0.5017, 1), (True, False): (0.5073, 0),
                                     (False, True): (0.5017, 0), (True, True): (0.5329, 0)}.items():
        record(tmp_path, spt, lsa, lsa, seed, top1)
    with caplog.at_level(logging.WARNING):
        report = write_report(tmp_path, make_plots=False)
    assert report.effects.empty
    assert not (tmp_path / "factorial_effects.csv").exists()
    assert sum("factorial effects left out" in r.getMessage() for r in caplog.records) == 1
    for name in ("comparison.md", "comparison.html", "comparison.tex"):
        assert "Factorial effects left out" in (tmp_path / name).read_text()


def test_only_seeds_with_the_full_factorial_are_fitted(tmp_path):
    # seed 0 holds all four variants; seed 1 lacks SPT (its ViT is far off): the
    # effects are seed 0's exact ones, fitted on one seed.
    seed0 = {(False, False): 0.50, (True, False): 0.53, (False, True): 0.51, (True, True): 0.58}
    for (spt, lsa), top1 in seed0.items():
        record(tmp_path, spt, lsa, lsa, 0, top1)
    for (spt, lsa), top1 in {(False, False): 0.10, (False, True): 0.52, (True, True): 0.59}.items():
        record(tmp_path, spt, lsa, lsa, 1, top1)
    effects = factorial(load_runs(tmp_path)).set_index("term")
    y = {k: 100 * v for k, v in seed0.items()}
    spt = (y[True, False] + y[True, True] - y[False, False] - y[False, True]) / 2
    assert effects.loc["SPT", "top1_effect"] == pytest.approx(spt)
    assert set(effects["seeds"]) == {1}


def test_holm_corrects_the_family_and_keeps_the_uncorrected_interval(four_by_three):
    from statsmodels.stats.multitest import multipletests

    report = write_report(four_by_three, make_plots=False)
    table = report.table.set_index("variant")
    rest = table.drop("ViT")
    assert (rest["d_top1_p"] < 0.1).all()
    expected = multipletests(rest["d_top1_p"], method="holm")[1]
    assert rest["d_top1_p_holm"].to_numpy() == pytest.approx(expected)
    # SPT and LSA: uncorrected p < 0.1 but not significant; SL-ViT survives Holm
    for variant, bold in (("SPT", False), ("LSA (mask + temp.)", False), ("SL-ViT", True)):
        line = next(li for li in report.markdown.splitlines() if li.startswith(f"| {variant} |"))
        assert ("**" in line.split("|")[8]) is bold
    assert "Holm's correction across the block's 3 Δ test(s)" in report.markdown
    assert "uncorrected" in report.markdown


@pytest.mark.parametrize("seed", range(6))
def test_holm_is_statsmodels_holm_with_nan_left_out(seed):
    """The report's Holm adjustment equals statsmodels' ``multipletests``
    over the finite p-values, for families with ties, values near 1 and NaNs."""
    from statsmodels.stats.multitest import multipletests

    from ablation.report.stats import holm

    rng = np.random.default_rng(seed)
    p = rng.choice([*rng.uniform(0, 1, 5), 0.01, 0.01, 0.9, 0.049], size=int(rng.integers(1, 10)))
    p[rng.random(p.size) < 0.2] = np.nan
    got = holm(p)
    finite = np.isfinite(p)
    assert np.isnan(got[~finite]).all()
    if finite.any():
        np.testing.assert_allclose(got[finite], multipletests(p[finite], method="holm")[1],
                                   rtol=0, atol=1e-15)


def test_holm_turns_off_bold_that_an_uncorrected_interval_would_give(tmp_path):
    """Seven variants each about 1 pp better (differences 1.0, 1.3, 0.7 by seed, p = 0.03):
    every uncorrected interval excludes zero, none survives Holm over seven tests."""
    base = [0.50, 0.52, 0.54]
    for seed, b in enumerate(base):
        record(tmp_path, False, False, False, seed, b)
        for spt, lsa, temp in [k for k in product((False, True), repeat=3) if any(k)]:
            record(tmp_path, spt, lsa, temp, seed, b + [0.010, 0.013, 0.007][seed])
    report = write_report(tmp_path, make_plots=False)
    rest = report.table[report.table["variant"] != "ViT"]
    assert len(rest) == 7 and (rest["d_top1_low"] > 0).all()
    assert (rest["d_top1_p"] < 0.05).all() and (rest["d_top1_p_holm"] > 0.05).all()
    assert "**" not in report.markdown.split("Factorial effects")[0]


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
