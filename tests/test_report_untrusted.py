"""The report reads records as untrusted: a value it computes with that has the
wrong type, or attention maps too large or not plain arrays, cost that record
(or those maps) one line, never the report."""
import logging

import numpy as np
import pytest

from ablation.report import load_runs, write_report
from tests.helpers.records import BASE_CONFIG, record

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
    {"role": "final", "tuning": {"study": "s", "params": ["trainer.learning_rate"],
                                 "values": {"trainer.learning_rate": "fast"}, "trials": 3}},
    {"role": "trial", "tuning": {"study": 7, "params": [], "values": {}, "trials": 0}},
], ids=["batch as text", "negative passes", "fractional key_dim", "trainer a list",
        "summary as text", "layer as text", "tuned value as text", "no search"])
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


def test_attention_maps_too_large_or_not_plain_arrays_are_skipped_with_a_line(tmp_path,
                                                                              caplog):
    from ablation.report.locality_plots import MAX_MAP_IMAGES, attention_maps

    runs = {}
    for name, images in [("many", MAX_MAP_IMAGES + 1), ("objects", 2)]:
        folder = record(tmp_path, False, False, False, 0 if name == "many" else 1, 0.5,
                        name=name, extra={"diagnostics": DIAGNOSTICS})
        arrays = dict(images=np.zeros((images, 8, 8, 1), "float32"), blocks=np.array([0]),
                      maps=np.zeros((images, 1, 4), "float32"), rows=np.array(2),
                      cols=np.array(2), patch_size=np.array(4))
        if name == "objects":
            arrays["blocks"] = np.array([{"a": 1}], dtype=object)
        np.savez(folder / "attention_maps.npz", **arrays)
        runs[name] = folder
    with caplog.at_level(logging.WARNING):
        drawn = attention_maps(load_runs(tmp_path), tmp_path / "attention_maps.png")
    assert drawn == []
    lines = [r.getMessage() for r in caplog.records if "attention_maps.npz skipped" in r.getMessage()]
    assert len(lines) == 2
    assert any("at most" in line for line in lines)  # the large one
    assert any("allow_pickle" in line or "Object arrays" in line for line in lines)
