"""The locality figures (ablation/report/locality_plots.py): attention maps too large
or not plain arrays are skipped with a line, never drawn from."""
import logging

import numpy as np

from ablation.report import load_runs
from tests.helpers.records import record


DIAGNOSTICS = {"probe_images": 4, "summary": {"mean_distance_px": 3.0,
                                               "normalized_entropy": 0.5},
               "layers": [{"layer": 0, "mean_distance_px": [3.0], "normalized_entropy": [0.5]}]}


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
