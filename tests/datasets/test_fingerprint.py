"""A run is what it was trained on (ablation/data/fingerprint.py): the record carries a
fingerprint of the data read, and resume, skip and the report refuse to mix runs on
other data. Image folders are read and fingerprinted by one walk, links followed:
re-pointing a linked class folder changes the fingerprint; the fingerprint covers
exactly what was read.

Every test here runs under an alarm (the ``alarm`` fixture), so a read that hangs
fails the test instead of blocking the suite."""
import hashlib
import json
import os
import shutil
import tarfile

import numpy as np
import pytest
from PIL import Image

from ablation.data import DataError, load_dataset
from tests.helpers.archives import cifar_batch, make_cifar_archive
from tests.helpers.commands import run_cli, run_in_process
from tests.helpers.config import compose
from tests.helpers.images import image_folder

pytestmark = pytest.mark.usefixtures("alarm")


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


def cfg_for(root):
    return compose("dataset=image_folder", f"dataset.path={root}", "dataset.image_size=8",
                   "dataset.test_fraction=0.34").dataset


def test_linked_class_folders_are_read_and_fingerprinted_and_re_pointing_them_is_seen(tmp_path):
    from ablation.data.fingerprint import check_same_data, data_fingerprint

    first = image_folder(tmp_path / "first", seed=0)
    second = image_folder(tmp_path / "second", seed=1)  # the same names, other pixels
    root = tmp_path / "data"
    root.mkdir()
    for name in ("a", "b"):
        (root / name).symlink_to(first / name, target_is_directory=True)
    before = data_fingerprint(cfg_for(root))
    assert before["source"] == f"{root} (6 files)"  # what the loader reads through the links
    data = load_dataset(cfg_for(root), 0)
    assert len(data.x_train) + len(data.x_val) + len(data.x_test) == 6

    (root / "a").unlink()
    (root / "a").symlink_to(second / "a", target_is_directory=True)
    after = data_fingerprint(cfg_for(root))
    assert after["fingerprint"] != before["fingerprint"]
    with pytest.raises(DataError, match="holds a run trained on other data"):
        check_same_data({"data": before}, after, tmp_path / "job")


def test_a_linked_image_file_is_read_and_hashed_as_what_it_points_at(tmp_path):
    from ablation.data.fingerprint import data_fingerprint

    root = image_folder(tmp_path / "data")
    elsewhere = image_folder(tmp_path / "elsewhere", classes=("z",), count=2, seed=5)
    (root / "a" / "3.png").symlink_to(elsewhere / "z" / "0.png")
    (root / "b" / "3.png").symlink_to(tmp_path / "nothing.png")  # a link to nothing
    before = data_fingerprint(cfg_for(root))
    assert before["source"] == f"{root} (7 files)"
    (root / "a" / "3.png").unlink()
    (root / "a" / "3.png").symlink_to(elsewhere / "z" / "1.png")
    assert data_fingerprint(cfg_for(root))["fingerprint"] != before["fingerprint"]


def test_the_fingerprint_covers_exactly_the_files_read(tmp_path):
    """Files the loader does not read (not images, hidden, in no class) leave it
    as it was; an image read changes it. A folder of images alone keeps the
    digest it had before (the same names-and-contents formula)."""
    from ablation.data.fingerprint import data_fingerprint

    root = image_folder(tmp_path / "data")
    plain = data_fingerprint(cfg_for(root))
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(bytes(path.relative_to(root)) + b"\0"
                 + hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n")
    assert plain["fingerprint"] == "sha256:" + h.hexdigest()

    (root / "a" / "notes.txt").write_text("not read")
    (root / "b" / ".hidden.png").write_bytes(b"not read")
    (root / "README").write_text("not read")
    os.mkfifo(root / "a" / "pipe.png")
    assert data_fingerprint(cfg_for(root)) == plain
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(root / "b" / "0.png")
    assert data_fingerprint(cfg_for(root))["fingerprint"] != plain["fingerprint"]


def test_an_extracted_cifar_folder_is_fingerprinted_by_the_batches_read(tmp_path):
    from ablation.data.fingerprint import data_fingerprint

    make_cifar_archive(tmp_path / "c.tar.gz", fine=False)
    with tarfile.open(tmp_path / "c.tar.gz") as tar:
        tar.extractall(tmp_path / "cifar", filter="data")
    cfg = {"name": "cifar10", "path": str(tmp_path / "cifar")}
    before = data_fingerprint(cfg)
    assert before["source"] == f"{tmp_path / 'cifar'} (7 files)"
    (tmp_path / "cifar" / "cifar-10-batches-py" / "readme.html").write_text("not read")
    (tmp_path / "cifar" / "notes.txt").write_text("not read")
    assert data_fingerprint(cfg) == before
    # a batch rewritten in place (the folders' own times unchanged) is seen in this process
    batch_file = tmp_path / "cifar" / "cifar-10-batches-py" / "test_batch"
    batch_file.write_bytes(cifar_batch(np.ones((1, 32, 32, 3), np.uint8), [1], fine=False))
    assert data_fingerprint(cfg)["fingerprint"] != before["fingerprint"]
