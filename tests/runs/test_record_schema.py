"""The record schema: one declaration shared by the writer and the reader.

Hostile records (valid JSON, wrong types or ranges) are each skipped with one
warning naming the file and the field, and the rest of the table is exactly
what it is without them; the writer refuses what the reader would refuse.
"""
import json
import os
import stat

import pandas as pd
import pytest

from ablation.runs.record import RecordError, read_record, write_record
from ablation.report import comparison, load_runs
from tests.helpers.config import compose
from tests.helpers.records import TOP1, record


def set_path(rec, dotted, value):
    *parents, last = dotted.split(".")
    target = rec
    for p in parents:
        target = target[int(p)] if isinstance(target, list) else target[p]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return rec


# case: (field set, its hostile value, the field the warning names)
HOSTILE = {
    "seed as a word": ("seed", "zero", "seed"),
    "seed as a float": ("seed", 1.0, "seed"),
    "seed as a boolean": ("seed", True, "seed"),
    "switches as a string": ("switches", "spt,lsa", "switches"),
    "switches as a list": ("switches", [True, False, False], "switches"),
    "spt as the string false": ("switches.spt", "false", "switches.spt"),
    "lsa as 0": ("switches.lsa", 0, "switches.lsa"),
    "metrics as a string": ("metrics", "0.5", "metrics"),
    "metrics as a list": ("metrics", [0.5], "metrics"),
    "top-1 as a percentage": ("metrics.test_top1", 95.8, "metrics.test_top1"),
    "top-5 negative": ("metrics.test_top5", -0.1, "metrics.test_top5"),
    "top-1 as a string": ("metrics.test_top1", "0.5", "metrics.test_top1"),
    "completed without top-1": ("metrics.test_top1", None, "metrics.test_top1"),
    "wandb as a string": ("wandb", "offline", "wandb"),
    "wandb as a list": ("wandb", ["offline"], "wandb"),
    "config null": ("config", None, "config"),
    "config a list": ("config", [], "config"),
    "params as a string": ("params", "1000", "params"),
    "history as a string": ("history", "epoch 1", "history"),
    "history rows of strings": ("history", ["epoch 1", "epoch 2"], "history.0"),
    "history epoch as a string": ("history.0.epoch", "1", "history.0.epoch"),
    "history value as a string": ("history.1.val/top1", "0.4", "history.1.val/top1"),
    "dataset null": ("dataset", None, "dataset"),
    "dataset empty": ("dataset", "", "dataset"),
    "model a number": ("model", 3, "model"),
    "status unknown": ("status", "running", "status"),
    "schema unknown": ("schema", 2, "schema"),
    "train_seconds negative": ("train_seconds", -1.0, "train_seconds"),
    "schema true": ("schema", True, "schema"),
    "schema 1.0": ("schema", 1.0, "schema"),
    "top-5 below top-1": ("metrics.test_top5", 0.3, "metrics.test_top5"),
    "best top-5 below best top-1": ("metrics", {"test_top1": 0.5, "test_top5": 0.7,
                                                "best_test_top1": 0.6, "best_test_top5": 0.55},
                                    "metrics.best_test_top5"),
    "history top-1 as a percentage": ("history.1.val/top1", 40.0, "history.1.val/top1"),
    "history top-5 negative": ("history.0.train/top5", -0.2, "history.0.train/top5"),
    "history epoch repeated": ("history.1.epoch", 1, "history.1.epoch"),
    "history epochs decreasing": ("history.2.epoch", 1, "history.2.epoch"),
    "wandb mode unknown": ("wandb.mode", "bogus", "wandb.mode"),
    "wandb id a path": ("wandb.id", "a/b", "wandb.id"),
    "test split of -5 images": ("data", {"train": 10, "val": 2, "test": -5}, "data.test"),
    "test split of no images": ("data", {"train": 10, "val": 2, "test": 0}, "data.test"),
    "params past 64 bits": ("trainable_params", 10**400, "trainable_params"),
}


@pytest.fixture(scope="module")
def good_table(tmp_path_factory):
    """Twelve hand-written records (four variants x three seeds) and their table."""
    root = tmp_path_factory.mktemp("good")
    for (spt, lsa), values in TOP1.items():
        for seed, v in enumerate(values):
            record(root, spt, lsa, lsa, seed, v)
    return root, comparison(load_runs(root))


@pytest.mark.parametrize("dotted, value, field", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_record_is_skipped_naming_the_field(good_table, tmp_path, caplog, dotted,
                                                    value, field):
    good, table = good_table
    root = tmp_path / "sweep"
    for path in good.rglob("run.json"):
        (root / path.parent.name).mkdir(parents=True)
        (root / path.parent.name / "run.json").write_text(path.read_text())
    # A later copy of the ViT seed-0 run, then one field made hostile: were it
    # read, it would replace (or, as SPT, displace) a good run.
    vit = json.loads((root / "000-s0-cifar10-paper" / "run.json").read_text())
    vit["finished_at"] = "2026-11-23T00:00:00+00:00"
    (root / "hostile").mkdir()
    (root / "hostile" / "run.json").write_text(json.dumps(set_path(vit, dotted, value)))
    with caplog.at_level("WARNING"):
        runs = load_runs(root)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    named = [w for w in warnings if "hostile/run.json" in w]
    assert len(named) == 1, warnings
    assert f"hostile/run.json: {field}: " in named[0] and "\n" not in named[0]
    assert len(runs) == 12
    pd.testing.assert_frame_equal(comparison(runs), table)


@pytest.mark.parametrize("dotted, value, field", HOSTILE.values(), ids=HOSTILE.keys())
def test_writer_refuses_what_the_reader_refuses(tmp_path, dotted, value, field):
    folder = record(tmp_path, False, False, False, 0, 0.5)
    good = json.loads((folder / "run.json").read_text())
    target = tmp_path / "bad"
    with pytest.raises(RecordError, match=f"run.json: {field}: "):
        write_record(target, set_path(good, dotted, value))
    assert not target.exists()


def test_new_optional_fields_and_extra_keys_are_read(tmp_path):
    folder = record(tmp_path, True, True, True, 0, 0.6)
    rec = json.loads((folder / "run.json").read_text())
    rec.update(trainable_params=900, protocol="official", resumed_from_epochs=[1, 2],
               resumed_from_epoch=2, diagnostics={"probe_images": 8, "layers": [], "summary": {
                   "mean_distance_px": 3.0, "normalized_entropy": 0.5}},
               future_field={"anything": ["goes"]})
    rec["metrics"].update(best_test_top1=0.61, best_test_top5=0.9, best_test_epoch=2)
    rec["history"][0].update({"locality/block_0": 1.5, "temperature/block_1": 3.9})
    write_record(folder, rec)
    assert read_record(folder / "run.json")["future_field"] == {"anything": ["goes"]}
    assert len(load_runs(tmp_path)) == 1


def test_the_failed_record_of_a_job_is_valid(tmp_path):
    from ablation.job import write_failure

    cfg = compose("experiment=smoke", f"results_dir={tmp_path}", "wandb.mode=disabled")
    write_failure(cfg, tmp_path / "job", RuntimeError("no luck"))
    rec = read_record(tmp_path / "job" / "run.json")
    assert rec["status"] == "failed" and rec["error"] == "RuntimeError: no luck"


def test_record_file_mode_follows_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        folder = record(tmp_path, False, False, False, 0, 0.5)
    finally:
        os.umask(old)
    assert stat.S_IMODE((folder / "run.json").stat().st_mode) == 0o644
