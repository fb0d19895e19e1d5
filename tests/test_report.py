"""The reporter on hand-made records whose answers are computed by hand here."""
import csv
import json
import re
import subprocess
import sys
from itertools import product

import numpy as np
import pytest
from scipy import stats

from ablation.report import ReportError, comparison, factorial, load_runs, write_report
from tests.helpers.paths import ROOT
from tests.helpers.records import BASE_CONFIG, TOP1, record, row


def t_interval_by_hand(diffs):
    """mean +- t(0.975, n-1) * sd / sqrt(n), with t from a printed table (n = 3: 4.303)."""
    table = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776}  # two-sided 95 %, df = n - 1
    d = np.asarray(diffs, dtype=float)
    half = table[len(d)] * d.std(ddof=1) / np.sqrt(len(d))
    return d.mean() - half, d.mean() + half


def test_means_deviations_gaps_and_t_intervals(four_by_three):
    table = comparison(load_runs(four_by_three))
    assert list(table["variant"]) == ["ViT", "SPT", "LSA (mask + temp.)", "SL-ViT"]
    vit, spt, sl = row(table, "ViT"), row(table, "SPT"), row(table, "SL-ViT")
    assert vit["top1_mean"] == pytest.approx(52.0) and vit["top1_std"] == pytest.approx(2.0)
    assert vit["n"] == 3 and np.isnan(vit["d_top1"])
    assert spt["top1_mean"] == pytest.approx(100 * np.mean(TOP1[(True, False)]))
    assert spt["top1_std"] == pytest.approx(100 * np.std(TOP1[(True, False)], ddof=1))
    # paired differences by seed: 3, 4, 1 -> mean 8/3, sd sqrt(7/3); a percentile
    # bootstrap gave their range [1, 4] (75 % coverage); the t-interval is far wider.
    assert spt["d_top1"] == pytest.approx(8 / 3)
    low, high = t_interval_by_hand([3, 4, 1])
    assert (spt["d_top1_low"], spt["d_top1_high"]) == pytest.approx((low, high), abs=2e-3)
    assert spt["d_top1_low"] < 0 < spt["d_top1_high"]          # [-1.13, +6.46]
    assert spt["d_top5"] == pytest.approx(8 / 3)  # top-5 = top-1 + 20 points here
    low, high = t_interval_by_hand([8, 7, 6])
    assert (sl["d_top1_low"], sl["d_top1_high"]) == pytest.approx((low, high), abs=2e-3)
    assert sl["d_top1_low"] > 0                                # [+4.52, +9.48]
    # the same against scipy's t quantile, to full precision
    half = stats.t.ppf(0.975, 2) * 1.0 / np.sqrt(3)
    assert sl["d_top1_high"] == pytest.approx(7 + half)


def test_bold_marks_only_gaps_whose_interval_excludes_zero(four_by_three):
    md = write_report(four_by_three, make_plots=False).markdown
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
            for line in md.splitlines() if line.startswith("| ") and line.count("|") == 13}
    assert rows["SL-ViT"][7].startswith("**+7.00 [+4.52, +9.48]**")   # excludes zero
    assert "**" not in rows["SPT"][7]                                 # [-1.13, +6.46]
    for variant, cells in rows.items():  # never by rank: not accuracy, speed or time
        assert not any("**" in cells[i] for i in (5, 6, 9, 10, 11)), variant
    assert "95 % paired t-interval, n-1 df" in md
    assert "1 test image = 0.01 pp (10,000 test images)" in md
    assert "no spread" not in md


def test_identical_differences_have_no_spread_and_say_so(tmp_path):
    for seed, (base, spt) in enumerate([(0.50, 0.51), (0.60, 0.61)]):
        record(tmp_path, False, False, False, seed, base)
        record(tmp_path, True, False, False, seed, spt)
    report = write_report(tmp_path, make_plots=False)
    spt = row(report.table, "SPT")
    assert spt["d_top1"] == pytest.approx(1.0)
    assert spt["d_top1_low"] == pytest.approx(1.0) == spt["d_top1_high"]
    assert spt["d_top1_no_spread"]
    assert "| +1.00 [+1.00, +1.00] |" in report.markdown               # shown, not bold
    assert "interval has no spread" in report.markdown


def test_the_same_gap_in_images_from_float32_accuracies_has_no_spread(tmp_path):
    # Keras reports float32 accuracies: +3 images of 10,000 in every seed gives
    # differences that differ by ~1e-6 pp; that is no spread, and never bold.
    for seed, base in enumerate([8686, 8650, 8701]):
        record(tmp_path, False, False, False, seed, float(np.float32(base / 10000)))
        record(tmp_path, True, False, False, seed, float(np.float32((base + 3) / 10000)))
    report = write_report(tmp_path, make_plots=False)
    spt = row(report.table, "SPT")
    assert spt["d_top1_no_spread"]
    assert spt["d_top1"] == pytest.approx(0.03, abs=1e-5)
    assert "**" not in next(line for line in report.markdown.splitlines()
                            if line.startswith("| SPT |"))


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


def test_failed_missing_and_corrupt_records(tmp_path, caplog):
    record(tmp_path, False, False, False, 0, 0.50)
    record(tmp_path, False, False, False, 1, 0.52)
    record(tmp_path, True, False, False, 0, 0.60)
    record(tmp_path, True, False, False, 1, 0.0, status="failed")
    record(tmp_path, True, True, True, 0, 0.0, status="failed")
    record(tmp_path, False, True, False, 0, 0.0, status="interrupted")
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "run.json").write_text('{"schema": 1, "status": "comp')
    (tmp_path / "future").mkdir()
    (tmp_path / "future" / "run.json").write_text(json.dumps({"schema": 99}))
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "run.json").write_text(json.dumps({"schema": 1, "status": "completed"}))
    runs = load_runs(tmp_path)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    for name in ("corrupt", "future", "partial"):
        assert sum(f"/{name}/run.json" in w for w in warnings) == 1
    assert len(runs) == 6
    table = comparison(runs)
    spt = row(table, "SPT")
    assert (spt["n"], spt["n_failed"], spt["status"]) == (1, 1, "ok")
    assert spt["top1_mean"] == pytest.approx(60.0)        # the failed run is not averaged in
    assert spt["d_top1"] == pytest.approx(10.0)           # paired on seed 0 only
    assert row(table, "SL-ViT")["status"] == "failed"
    stopped = row(table, "LSA mask")  # stopped, not failed: a rerun resumes it
    assert (stopped["n"], stopped["n_failed"], stopped["n_interrupted"]) == (0, 0, 1)
    assert stopped["status"] == "interrupted"
    assert row(table, "LSA (mask + temp.)")["status"] == "missing"
    md = write_report(tmp_path, make_plots=False).markdown
    assert "| SPT | ✓ |  |  | 1 (+1 failed) | 60.00 |" in md  # no bold by rank
    assert re.search(r"\| SL-ViT \|.*\| 0 \(\+1 failed\) \| failed \| failed \|", md)
    assert re.search(r"\| LSA mask \|.*\| 0 \(\+1 interrupted\) \| interrupted \| interrupted \|",
                     md)
    assert re.search(r"\| LSA \(mask \+ temp\.\) \|.*\| 0 \| missing \| missing \|", md)


def test_runs_of_different_settings_are_never_mixed(tmp_path, caplog):
    other = json.loads(json.dumps(BASE_CONFIG))
    other["trainer"]["learning_rate"] = 0.003
    for seed in (0, 1):
        record(tmp_path, False, False, False, seed, 0.50, name=f"a{seed}")
        record(tmp_path, False, False, False, seed, 0.70, config=other, name=f"b{seed}")
    table = comparison(load_runs(tmp_path))
    vit = table[table["variant"] == "ViT"].set_index("setting")["top1_mean"]
    assert vit.to_dict() == pytest.approx({"trainer.learning_rate=0.001": 50.0,
                                           "trainer.learning_rate=0.003": 70.0})
    assert "differ in trainer.learning_rate" in caplog.text


def test_datasets_are_separate_blocks(tmp_path):
    for dataset, value in (("cifar10", 0.9), ("cifar100", 0.6)):
        record(tmp_path, False, False, False, 0, value, dataset=dataset)
    table = comparison(load_runs(tmp_path))
    assert len(table) == 2 * 4  # each block lists the paper's four variants
    vit = table[table["variant"] == "ViT"].set_index("dataset")["top1_mean"]
    assert vit.to_dict() == pytest.approx({"cifar10": 90.0, "cifar100": 60.0})


def numbers(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"[-+]?\d+\.\d+", cell)]


def test_outputs_parse_back_to_the_same_numbers(four_by_three):
    report = write_report(four_by_three, make_plots=False)
    table = report.table.set_index("variant")
    md_rows = [line for line in (four_by_three / "comparison.md").read_text().splitlines()
               if line.startswith("| ") and not line.startswith("| Variant")
               and not line.startswith("| Term") and line.count("|") == 13]
    tex_rows = [line for line in (four_by_three / "comparison.tex").read_text().splitlines()
                if line.endswith(r"\\") and r"\checkmark" in line or line.startswith("ViT &")]
    assert len(md_rows) == len(tex_rows) == 4
    for md, tex in zip(md_rows, tex_rows):
        md_cells = [c.strip() for c in md.strip("|").split("|")]
        tex_cells = [c.strip() for c in tex.rstrip("\\").split("&")]
        r = table.loc[md_cells[0]]
        assert md_cells[0] in tex_cells[0]  # a long name is set in a \parbox
        # Markdown: every column; comparison.tex, the paper's: Variant, SPT, LSA, n,
        # Top-1, ΔTop-1, Params (the temperature follows the mask: no column of its own)
        for top1, gap1 in ((md_cells[5], md_cells[7]), (tex_cells[4], tex_cells[5])):
            assert numbers(top1) == pytest.approx(
                [round(r["top1_mean"], 2), round(r["top1_std"], 2)])
            if md_cells[0] != "ViT":
                assert numbers(gap1) == pytest.approx(
                    [round(r[k], 2) for k in ("d_top1", "d_top1_low", "d_top1_high")])
        assert numbers(md_cells[6]) == pytest.approx(
            [round(r["top5_mean"], 2), round(r["top5_std"], 2)])
    assert "**" in next(m for m in md_rows if m.startswith("| SL-ViT |")).split("|")[8]
    assert r"\textbf{" in next(t for t in tex_rows if t.startswith("SL-ViT"))
    with open(four_by_three / "comparison.csv") as f:
        csv_rows = list(csv.DictReader(f))
    for r in csv_rows:  # 10,000 test images x 3 seeds: 4 decimals (one image = 0.0033 pp)
        assert float(r["top1_mean"]) == pytest.approx(table.loc[r["variant"], "top1_mean"],
                                                      abs=5e-5)
        if r["d_top1_low"]:
            assert float(r["d_top1_low"]) == pytest.approx(table.loc[r["variant"], "d_top1_low"],
                                                           abs=5e-5)
    assert "<table>" in (four_by_three / "comparison.html").read_text()


def test_plots_are_written(four_by_three):
    files = {p.name for p in write_report(four_by_three).files}
    assert {"top1.png", "val_top1.png", "temperature.png"} <= files
    assert (four_by_three / "top1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_empty_or_wrong_path_is_a_one_line_error(tmp_path):
    with pytest.raises(ReportError, match="no run.json below"):
        load_runs(tmp_path)
    for path in (tmp_path, tmp_path / "nope"):
        result = subprocess.run([sys.executable, "-m", "ablation.report", str(path)],
                                cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 2
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


@pytest.mark.slow   # slower than a fast-lane test
def test_reporting_again_updates_the_one_wandb_report_run(four_by_three, wandb_cli):
    from tests.helpers.wandb_runs import wandb_inspect

    first = write_report(four_by_three, wandb_settings={"mode": "offline"}, make_plots=False)
    again = write_report(four_by_three, wandb_settings={"mode": "offline"}, make_plots=False)
    assert again.wandb["id"] == first.wandb["id"]  # one report run per group
    (run_dir,) = four_by_three.glob("wandb/offline-run-*")  # one left to `wandb sync`
    assert run_dir.name.endswith(again.wandb["id"])
    (earlier,) = four_by_three.glob(".replaced/*/wandb/offline-run-*")  # set aside
    # its folder name may equal the new run's: W&B names run folders by the second
    assert earlier.name.endswith(first.wandb["id"])
    # with the files it reported beside: one generation set aside per report
    (generation,) = four_by_three.glob(".replaced/report-*")
    assert earlier.parent.parent == generation and (generation / "comparison.md").is_file()
    seen = wandb_inspect(wandb_cli, run_dir)
    assert seen["job_type"] == "report" and seen["group"] == "g" and seen["state"] == "finished"


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


def test_no_one_seed_footnote_where_intervals_are_shown(four_by_three):
    md = write_report(four_by_three, make_plots=False).markdown
    assert "Factorial effects (3 seed(s))" in md
    assert "No interval with one seed" not in md


def test_equal_curves_stay_visible(four_by_three):
    from ablation.report import plots

    runs = load_runs(four_by_three)
    runs["history"] = [[{"epoch": e, "val/top1": 0.1 * e} for e in (1, 2, 3)]] * len(runs)
    plt, fig = plots.val_figure(comparison(runs), runs)
    lines = fig.axes[0].get_lines()
    assert len(lines) == 4                       # all equal, on top of each other
    # yet each drawn differently: its own dash pattern AND its own marker ...
    assert len({(line._unscaled_dash_pattern[0],
                 tuple(line._unscaled_dash_pattern[1] or ())) for line in lines}) == 4
    assert len({line.get_marker() for line in lines}) == 4
    # ... and each later line narrower, so the earlier one still shows around it
    widths = [line.get_linewidth() for line in lines]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == 4
    assert all(line.get_alpha() < 1 for line in lines)
    plt.close(fig)
    # every one of the eight variants is distinct too
    styles = [plots.line_style(label) for label in plots.VARIANTS.values()]
    assert len({str(s["linestyle"]) for s in styles}) == 8
    assert len({s["marker"] for s in styles}) == 8


def test_protocols_are_separate_labelled_blocks(tmp_path):
    official = json.loads(json.dumps(BASE_CONFIG))
    official["trainer"]["protocol"] = "official"
    for seed in (0, 1):
        record(tmp_path, False, False, False, seed, 0.50, name=f"h{seed}")   # older: no key
        record(tmp_path, False, False, False, seed, 0.70, config=official, name=f"o{seed}",
               extra={"protocol": "official", "trainable_params": 900,
                      "metrics": {"test_top1": 0.70, "test_top5": 0.9,
                                  "best_test_top1": 0.72, "best_test_epoch": 2}})
    report = write_report(tmp_path, make_plots=False)
    vit = report.table[report.table["variant"] == "ViT"].set_index("protocol")
    assert vit["top1_mean"].to_dict() == pytest.approx({"holdout": 50.0, "official": 70.0})
    assert set(vit["setting"]) == {""}           # the protocol is the block, not a setting
    assert "## cifar10 × paper, holdout protocol" in report.markdown
    assert "## cifar10 × paper, official protocol" in report.markdown
    assert vit.loc["official", "trainable_params"] == 900
    assert "| 900 |" in report.markdown and "| 1.0k* |" in report.markdown
