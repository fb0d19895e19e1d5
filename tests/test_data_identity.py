"""A run is what it was trained on: the record carries a fingerprint of the data
read, and resume, skip and the report refuse to mix runs on other data."""
import json
import shutil

import numpy as np
import pytest

from tests.helpers.commands import run_cli, run_in_process


def _image_folder(root, seed):
    from PIL import Image

    rng = np.random.default_rng(seed)
    for label in ("a", "b"):
        (root / label).mkdir(parents=True)
        for i in range(16):
            pixels = rng.integers(0, 256, (8, 8), dtype=np.uint8)
            Image.fromarray(pixels).save(root / label / f"{i}.png")
    return root


def _args(tmp_path, folder):
    return ["experiment=smoke", "dataset=image_folder", f"dataset.path={folder}",
            "dataset.image_size=8", "dataset.channels=1", "trainer.epochs=1",
            "trainer.verbose=0", "wandb.mode=disabled", f"results_dir={tmp_path / 'results'}",
            "report.after_sweep=false", "diagnostics.enabled=false"]


@pytest.mark.slow
def test_other_data_behind_the_same_path_is_refused_and_the_report_will_not_mix_them(tmp_path):
    from ablation.report.load import load_runs
    from ablation.runs.record import find_records, read_record

    folder = _image_folder(tmp_path / "images", seed=0)
    done = run_cli(*_args(tmp_path, folder))
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = find_records(tmp_path / "results")
    record = read_record(path)
    assert record["data"]["fingerprint"].startswith("sha256:")
    assert "32 files" in record["data"]["source"]

    shutil.rmtree(folder)
    _image_folder(folder, seed=1)  # the same names and sizes, other pixels
    refused = run_in_process(*_args(tmp_path, folder))
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "holds a run trained on other data" in line
    assert record["data"]["fingerprint"][:19] in line
    assert read_record(path) == record  # nothing was overwritten

    other = json.loads(path.read_text())  # another seed of the block, on the new data
    other.update(seed=1, data={**other["data"], "fingerprint": "sha256:" + "0" * 64,
                               "source": "elsewhere"})
    (path.parent.parent / "vit-s1").mkdir()
    (path.parent.parent / "vit-s1" / "run.json").write_text(json.dumps(other))
    # runs on other data are another block, labelled by the data's fingerprint
    table = load_runs(tmp_path / "results")
    assert sorted(table["setting"]) == sorted([
        f"data={record['data']['fingerprint'][:19]}", "data=sha256:000000000000"])
