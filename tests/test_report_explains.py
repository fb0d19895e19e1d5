"""Figures and tables that explain themselves, looked at (matplotlib objects, rendered
text), not only written; Holm across a block's Δ tests; power per block."""
import base64
import csv
import json
import math
import re
from itertools import product

import numpy as np
import pytest

from ablation.report import comparison, load_runs, write_report
from tests.helpers.records import BASE_CONFIG, record, row


def test_top1_figure_says_mean_over_n_seeds_and_what_the_bars_are(four_by_three):
    from ablation.report import plots

    table = comparison(load_runs(four_by_three))
    assert plots.n_text(table) == "mean over 3 seeds"
    title = _titles(lambda: plots.top1_bars(table, four_by_three / "t.png"))
    assert "mean over 3 seeds" in title and "error bars: ±1 sample sd" in title


def _titles(draw) -> str:
    """Every axis title and label of the figures ``draw`` makes (savefig intercepted)."""
    import matplotlib.figure

    seen = []
    original = matplotlib.figure.Figure.savefig

    def capture(fig, *args, **kwargs):
        seen.extend([fig._suptitle.get_text() if fig._suptitle else ""]
                    + [t for ax in fig.axes for t in (ax.get_title(), ax.get_ylabel(),
                                                      ax.get_xlabel())])
        seen.append(json.dumps([list(ax.get_ylim()) for ax in fig.axes if ax.get_visible()]))
        return original(fig, *args, **kwargs)

    matplotlib.figure.Figure.savefig = capture
    try:
        draw()
    finally:
        matplotlib.figure.Figure.savefig = original
    return "\n".join(seen)


def test_val_curves_name_their_seeds(four_by_three):
    from ablation.report import plots

    runs = load_runs(four_by_three)
    text = _titles(lambda: plots.val_curves(comparison(runs), runs, four_by_three / "v.png"))
    assert "validation top-1 (%) per variant, mean over seeds 0, 1, 2" in text


def test_temperature_is_a_change_from_the_start_on_one_honest_axis(tmp_path):
    """Two variants drift by 0.3 % and 12 %: both panels share one symmetric axis wide
    enough for the larger, the start line is drawn and the seeds are named."""
    from ablation.report import temperature_plot

    cfg = json.loads(json.dumps(BASE_CONFIG))
    cfg["model"].update(key_dim=16)           # T0 = sqrt(16) = 4
    for seed in (0, 1):
        for spt, drift in ((False, 0.003), (True, 0.12)):
            history = [{"epoch": e, "val/top1": 0.5, "temperature/block_0": 4 * (1 + drift * e / 3)}
                       for e in (1, 2, 3)]
            record(tmp_path, spt, True, True, seed, 0.5, config=cfg, extra={"history": history})
    runs = load_runs(tmp_path)
    table = comparison(runs)
    changes = temperature_plot.changes(runs)
    small, seeds, from_t0 = changes["LSA (mask + temp.)"]
    assert from_t0 and seeds == [0, 1]
    assert small.loc[0, 0] == 0.0 and small.loc[3, 0] == pytest.approx(0.3, abs=1e-6)
    text = _titles(lambda: temperature_plot.temperature_figure(table, runs, tmp_path / "t.png"))
    limits = json.loads(text.splitlines()[-1])
    assert len(limits) == 2 and limits[0] == limits[1]          # one shared axis
    assert limits[0][1] == pytest.approx(12 * temperature_plot.MARGIN)
    assert limits[0][0] == -limits[0][1]                        # symmetric around the start
    assert "mean over seeds 0, 1" in text and "change from start (%)" in text
    # a lone tiny drift still gets the floor, not a panel autoscaled to 0.3 %
    assert temperature_plot.limit([small]) == temperature_plot.FLOOR_PCT


def test_html_embeds_every_figure_with_a_caption(four_by_three):
    report = write_report(four_by_three)
    page = (four_by_three / "comparison.html").read_text()
    images = [p for p in report.files if p.suffix == ".png"]
    embedded = re.findall(r"src='data:image/png;base64,([^']+)'", page)
    assert len(embedded) == len(images) >= 3
    assert {base64.b64decode(e) for e in embedded} == {p.read_bytes() for p in images}
    assert page.count("<figcaption>") == len(images)
    assert "±1 sample standard deviation" in page


def test_csv_accuracies_at_the_test_sets_precision_with_correct_counts(tmp_path):
    """9 of 360 images is exactly 2.5 points; float32 records say 2.499997615814209."""
    for seed in (0, 1):
        record(tmp_path, False, False, False, seed, float(np.float32(300 / 360)),
               extra={"data": {"test": 360}})
        record(tmp_path, True, True, True, seed, float(np.float32(309 / 360)),
               extra={"data": {"test": 360}})
    write_report(tmp_path, make_plots=False)
    with open(tmp_path / "comparison.csv") as f:
        rows = {r["variant"]: r for r in csv.DictReader(f)}
    assert rows["SL-ViT"]["d_top1"] == "2.5" and rows["SL-ViT"]["d_top1_images"] == "9.0"
    assert rows["SL-ViT"]["top1_correct"] == "309.0" and rows["ViT"]["top1_correct"] == "300.0"
    assert rows["ViT"]["top1_mean"] == "83.33"   # 100/720 pp per image: two decimals
    text = (tmp_path / "comparison.csv").read_text()
    assert not re.search(r"\d\.\d{7,}", text.replace(rows["SL-ViT"]["d_top1_p"] or "x", ""))


def test_speed_is_hidden_when_too_few_steps_were_timed(tmp_path):
    from ablation.report.captions import MIN_TIMED_STEPS

    cfg = json.loads(json.dumps(BASE_CONFIG))
    cfg["trainer"].update(batch_size=64, epochs=3)
    for spt, train in ((False, 1293), (True, 100_000)):   # 2 x 21 steps; 2 x 1563 steps
        record(tmp_path, spt, False, False, 0, 0.5, config=cfg,
               extra={"data": {"test": 360, "train": train}, "epochs_completed": 3,
                      "train_images_per_s": 4386.2})
    report = write_report(tmp_path, make_plots=False)
    table = report.table.set_index("variant")
    assert table.loc["ViT", "timed_steps"] == 42 < MIN_TIMED_STEPS
    assert table.loc["SPT", "timed_steps"] == 2 * 1563
    vit_line = next(li for li in report.markdown.splitlines() if li.startswith("| ViT |"))
    spt_line = next(li for li in report.markdown.splitlines() if li.startswith("| SPT |"))
    assert "4,386" not in vit_line and "—†" in vit_line and "4,386" in spt_line
    assert "† Train img/s left out: timed over only 42 training steps" in report.markdown


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


def test_factorial_note_says_the_seed_is_the_unit(four_by_three):
    md = write_report(four_by_three, make_plots=False).markdown
    assert "t-interval over the seeds (n − 1 df" in md and "the seed is the unit" in md
    assert "residuals" not in md and "sharper" not in md


def test_power_per_block_from_the_largest_paired_spread(four_by_three):
    from statsmodels.stats.power import TTestPower

    table = comparison(load_runs(four_by_three))
    # paired top-1 differences (pp) by seed against the ViT
    diffs = {"SPT": [3, 4, 1], "LSA (mask + temp.)": [1, 3, 2], "SL-ViT": [8, 7, 6]}
    largest = max(np.std(d, ddof=1) for d in diffs.values())  # SPT's, sqrt(7/3)
    d3 = TTestPower().solve_power(nobs=3, alpha=0.05, power=0.8, alternative="two-sided")
    vit = row(table, "ViT")
    assert vit["top1_power_sd"] == pytest.approx(largest)
    assert vit["top1_detectable_gap"] == pytest.approx(d3 * largest)
    spt = row(table, "SPT")
    n = next(k for k in range(2, 1000) if TTestPower().power(
        effect_size=(8 / 3) / largest, nobs=k, alpha=0.05, alternative="two-sided") >= 0.8)
    assert spt["top1_seeds_needed"] == n
    md = write_report(four_by_three, make_plots=False).markdown
    assert f"with 3 seeds the smallest detectable top-1 gap is {d3 * largest:.2f} pp" in md
    assert f"SPT {n}" in md


@pytest.mark.parametrize("effect", [4, 5, 5.5, 6, 7, 8, 9, 10, 11, 0.5, 0.05])
def test_seeds_needed_is_the_smallest_count_with_power_08(effect):
    # statsmodels' root finder fails between 2 and 3 seeds (and its power is NaN at
    # 5.5 with 2); the count must not. Power by simulation, independent of scipy's nct.
    from ablation.report.power import power_at, seeds_needed

    n = int(seeds_needed(effect, 1.0))
    assert power_at(effect, n) >= 0.8 and (n == 2 or power_at(effect, n - 1) < 0.8)
    rng = np.random.default_rng(0)
    for k, above in ((n, True), (n - 1, False)):
        if k < 2 or k > 50:
            continue
        from scipy import stats

        draws = rng.normal(effect, 1.0, size=(20_000, k))
        t = draws.mean(1) / (draws.std(1, ddof=1) / np.sqrt(k))
        simulated = np.mean(np.abs(t) > stats.t.isf(0.025, k - 1))
        assert (simulated >= 0.79) if above else (simulated < 0.81), (k, simulated)


def test_an_inert_switchs_copies_do_not_shrink_the_power_lines(tmp_path):
    # the Δ row of a copy of the ViT, and the factorial terms of an inert switch,
    # have almost no spread; planning with the largest sd leaves both lines as they were
    top1 = {(False, False): (0.9417, 0.9306, 0.9389), (True, False): (0.9611, 0.9583, 0.9500),
            (False, True): (0.9444, 0.9472, 0.9361), (True, True): (0.9611, 0.9611, 0.9556)}
    lines = {}
    for copies in (False, True):
        root = tmp_path / str(copies)
        for (spt, lsa), values in top1.items():
            for seed, value in enumerate(values):
                record(root, spt, lsa, lsa, seed, value)
                if copies:
                    record(root, spt, lsa, not lsa, seed, value)
        md = write_report(root, make_plots=False).markdown
        lines[copies] = [re.search(r"smallest detectable top-1 (gap|effect) is ([0-9.]+) pp",
                                   part).group(2)
                         for part in md.split("Factorial effects")[:2]]
    assert lines[True] == lines[False]


def test_official_protocol_shows_the_best_epoch_beside_the_final_one(tmp_path):
    official = json.loads(json.dumps(BASE_CONFIG))
    official["trainer"]["protocol"] = "official"
    for seed, (final, best) in enumerate(((0.70, 0.72), (0.71, 0.74))):
        for spt in (False, True):
            record(tmp_path, spt, False, False, seed, final + 0.01 * spt, config=official,
                   extra={"protocol": "official", "metrics": {
                       "test_top1": final + 0.01 * spt, "test_top5": 0.9,
                       "best_test_top1": best + 0.01 * spt, "best_test_top5": 0.95,
                       "best_test_epoch": 2}})
    report = write_report(tmp_path, make_plots=False)
    header = next(li for li in report.markdown.splitlines() if li.startswith("| Variant"))
    assert "Best-epoch top-1 (%, paper's measure)" in header
    vit = next(li for li in report.markdown.splitlines() if li.startswith("| ViT |"))
    cells = [c.strip() for c in vit.strip("|").split("|")]
    assert cells[5] == "70.50 ± 0.71" and cells[7] == "73.00 ± 1.41"
    assert "the measure the paper and its official code report" in report.markdown
    with open(tmp_path / "comparison.csv") as f:
        rows = {r["variant"]: r for r in csv.DictReader(f)}
    assert float(rows["SPT"]["best_top1_mean"]) == pytest.approx(74.0)
    assert float(rows["ViT"]["best_top5_mean"]) == pytest.approx(95.0)
    tex = (tmp_path / "comparison.tex").read_text()
    assert "Best-epoch top-1" in tex and "73.00" in tex
