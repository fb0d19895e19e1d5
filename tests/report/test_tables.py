"""The comparison table (ablation/report/tables.py) on hand-made records whose answers
are computed by hand here: means, deviations, paired gaps and their t-intervals, and
blocks that never mix datasets, protocols or settings."""
import json

import numpy as np
import pytest
from scipy import stats

from ablation.report import comparison, load_runs, write_report
from tests.helpers.records import BASE_CONFIG, TOP1, record, row
from tests.helpers.stats import t_interval_by_hand


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
