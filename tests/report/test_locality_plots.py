"""The locality figures (ablation/report/locality_plots.py): attention maps too large
or not plain arrays are skipped with a line, never drawn from."""
import logging

import numpy as np
import pytest

from ablation.report import load_runs
from tests.helpers.records import record


DIAGNOSTICS = {"probe_images": 4, "summary": {"mean_distance_px": 3.0,
                                               "normalized_entropy": 0.5},
               "layers": [{"layer": 0, "mean_distance_px": [3.0], "normalized_entropy": [0.5]}]}


def test_attention_maps_too_large_or_not_plain_arrays_are_skipped_with_a_line(tmp_path,
                                                                              caplog):
    from ablation.config.schema import MAX_ATTENTION_MAPS
    from ablation.report.locality_plots import attention_maps

    runs = {}
    for name, images in [("many", MAX_ATTENTION_MAPS + 1), ("objects", 2)]:
        folder = record(tmp_path, False, False, False, 0 if name == "many" else 1, 0.5,
                        name=name, extra={"diagnostics": DIAGNOSTICS})
        arrays = dict(images=np.zeros((images, 8, 8, 1), "float32"), blocks=np.array([0]),
                      maps=np.zeros((images, 1, 2, 2), "float32"), rows=np.array(2),
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
    assert any("not numbers" in line for line in lines)  # refused from its header


def _claimed(path, **shapes):
    """An .npz whose .npy headers claim ``shapes`` (float32) over almost no data: what a
    hostile file can say in a few kilobytes."""
    import io
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, shape in shapes.items():
            member = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                member, {"descr": "<f4", "fortran_order": False, "shape": shape})
            z.writestr(f"{name}.npy", member.getvalue() + bytes(64))


def test_maps_whose_headers_claim_too_much_are_skipped_before_anything_unpacks(tmp_path,
                                                                              caplog):
    """Shapes are read from the .npy headers and checked first: neither gigabytes of
    zeros nor thousands of blocks are unpacked or drawn."""
    from ablation.report.locality_plots import attention_maps

    base = dict(rows=(), cols=(), patch_size=())
    cases = {"huge": dict(images=(3, 32, 32, 3), blocks=(2,), maps=(3, 2, 12000, 12000)),
             "blocks": dict(images=(3, 32, 32, 3), blocks=(5000,), maps=(3, 5000, 8, 8)),
             "mismatch": dict(images=(3, 32, 32, 3), blocks=(2,), maps=(4, 2, 8, 8))}
    for seed, (name, shapes) in enumerate(cases.items()):
        folder = record(tmp_path, False, False, False, seed, 0.5, name=name,
                        extra={"diagnostics": DIAGNOSTICS})
        _claimed(folder / "attention_maps.npz", **shapes, **base)
    with caplog.at_level(logging.WARNING):
        assert attention_maps(load_runs(tmp_path), tmp_path / "attention_maps.png") == []
    lines = [r.getMessage() for r in caplog.records if "attention_maps.npz skipped" in r.getMessage()]
    assert len(lines) == 3 and all("not the maps a run saves" in line for line in lines), lines
    assert any("over the 67,108,864-byte cap" in line for line in lines)


@pytest.mark.slow
def test_every_valid_attention_maps_setting_is_drawn(tmp_path):
    """The largest count the config accepts is one the report draws."""
    from ablation.config.schema import MAX_ATTENTION_MAPS
    from ablation.report.locality_plots import attention_maps

    n = MAX_ATTENTION_MAPS
    folder = record(tmp_path, False, False, False, 0, 0.5, extra={"diagnostics": DIAGNOSTICS})
    np.savez_compressed(folder / "attention_maps.npz", images=np.zeros((n, 8, 8, 1), "float32"),
                        probe_indices=np.arange(n), blocks=np.array([0, 2, 4]),
                        maps=np.full((n, 3, 2, 2), 0.25, "float32"), rows=np.array(2),
                        cols=np.array(2), patch_size=np.array(4))
    assert attention_maps(load_runs(tmp_path), tmp_path / "attention_maps.png") != []


@pytest.mark.parametrize("tamper, says", [
    ({"blocks": np.array([10**12, -5])}, "are not layers counting up from 0"),
    ({"blocks": np.array([3, 0])}, "are not layers counting up from 0"),
    ({"maps": np.full((1, 2, 2, 2), np.nan, "float32")}, "not attention weights"),
    ({"maps": np.full((1, 2, 2, 2), 7.0, "float32")}, "not attention weights"),
    ({"images": np.full((1, 8, 8, 1), np.inf, "float32")}, "images hold values that are not"),
], ids=["blocks out of range", "blocks backwards", "NaN maps", "maps past 1", "inf images"])
def test_maps_whose_values_are_not_a_runs_are_skipped_with_a_line(tmp_path, caplog, tamper,
                                                                  says):
    from ablation.report.locality_plots import attention_maps

    folder = record(tmp_path, False, False, False, 0, 0.5, extra={"diagnostics": DIAGNOSTICS})
    arrays = dict(images=np.zeros((1, 8, 8, 1), "float32"), blocks=np.array([0, 3]),
                  maps=np.full((1, 2, 2, 2), 0.25, "float32"), rows=np.array(2),
                  cols=np.array(2), patch_size=np.array(4))
    np.savez(folder / "attention_maps.npz", **{**arrays, **tamper})
    with caplog.at_level(logging.WARNING):
        drawn = attention_maps(load_runs(tmp_path), tmp_path / "attention_maps.png")
    assert drawn == []
    (line,) = [r.getMessage() for r in caplog.records if "attention_maps.npz skipped" in
               r.getMessage()]
    assert says in line and "\n" not in line
    np.savez(folder / "attention_maps.npz", **arrays)  # the same run's sound maps are drawn
    assert attention_maps(load_runs(tmp_path), tmp_path / "attention_maps.png")
