"""Reading records (ablation/report/load.py): failed, interrupted, missing, corrupt,
too deeply nested or unusable records each cost one line, never the report; a record's
values are untrusted: one of the wrong type skips that record."""
import json
import logging
import re

import pytest

from ablation.report import comparison, load_runs, write_report
from tests.helpers.records import BASE_CONFIG, record, row


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


def test_deeply_nested_json_is_skipped_with_one_warning(tmp_path, caplog):
    record(tmp_path, False, False, False, 0, 0.5)
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "run.json").write_text("[" * 200_000)
    with caplog.at_level(logging.WARNING):
        runs = load_runs(tmp_path)
    assert len(runs) == 1
    named = [r.getMessage() for r in caplog.records if "deep/run.json" in r.getMessage()]
    assert len(named) == 1 and "nested too deeply" in named[0]


DIAGNOSTICS = {"probe_images": 4, "summary": {"mean_distance_px": 3.0,
                                               "normalized_entropy": 0.5},
               "layers": [{"layer": 0, "mean_distance_px": [3.0], "normalized_entropy": [0.5]}]}


def config(**trainer):
    return {**BASE_CONFIG, "trainer": {**BASE_CONFIG["trainer"], **trainer}}


@pytest.mark.parametrize("bad", [
    {"config": config(batch_size="sixty")},
    {"config": config(passes_per_epoch=-1)},
    {"config": {**BASE_CONFIG, "model": {"name": "paper", "key_dim": 2.5}}},
    {"config": {**BASE_CONFIG, "trainer": ["not", "a", "mapping"]}},
    {"diagnostics": {"summary": {"mean_distance_px": "far"}, "layers": []}},
    {"diagnostics": {**DIAGNOSTICS, "layers": [{"layer": "0", "mean_distance_px": [1]}]}},
    {"diagnostics": {**DIAGNOSTICS, "left_out": {"class_attention": "two"}}},
    {"role": "final", "tuning": {"study": "s", "params": ["trainer.learning_rate"],
                                 "values": {"trainer.learning_rate": "fast"}, "trials": 3}},
    {"role": "trial", "tuning": {"study": 7, "params": [], "values": {}, "trials": 0}},
], ids=["batch as text", "negative passes", "fractional key_dim", "trainer a list",
        "summary as text", "layer as text", "left out as text", "tuned value as text", "no search"])
def test_a_record_the_report_cannot_use_is_skipped_with_one_line(tmp_path, caplog, bad):
    for spt, lsa in [(False, False), (True, False), (False, True), (True, True)]:
        record(tmp_path, spt, lsa, lsa, 0, 0.5 + 0.01 * (spt + 2 * lsa),
               extra={"diagnostics": DIAGNOSTICS})
    extra = {"diagnostics": DIAGNOSTICS, **{k: v for k, v in bad.items() if k != "config"}}
    hostile = record(tmp_path, True, True, True, 1, 0.6, config=bad.get("config"),
                     name="hostile", extra=extra)
    with caplog.at_level(logging.WARNING):
        report = write_report(tmp_path, make_plots=True, wandb_settings={"mode": "disabled"})
    assert len(report.runs) == 4
    (line,) = [r.getMessage() for r in caplog.records if str(hostile) in r.getMessage()]
    assert line.startswith(f"skipping {hostile / 'run.json'}: its ")
