"""Bad input through the real command line: refused before any training, one
clear message naming the key, the value and what is allowed, a non-zero exit,
and nothing written."""
import numpy as np
import pytest
from PIL import Image

from conftest import run_cli
from test_data import make_cifar_archive

CASES = {
    "unknown dataset": (["dataset=imagenet22k"], "Could not find 'dataset/imagenet22k'"),
    "unknown model": (["model=huge"], "Could not find 'model/huge'"),
    "unknown experiment": (["experiment=nope"], "Could not find 'experiment/nope'"),
    "switch not a boolean": (["lsa=maybe"], "lsa='maybe' is not a boolean: use lsa=true or lsa=false"),
    "patch does not divide image": (["model.patch_size=5"],
                                    "model.patch_size=5 does not divide model.image_size=16"),
    "zero epochs": (["trainer.epochs=0"], "trainer.epochs=0 must be a positive number"),
    "negative batch": (["trainer.batch_size=-4"], "trainer.batch_size=-4 must be a positive number"),
    "zero learning rate": (["trainer.learning_rate=0"],
                           "trainer.learning_rate=0 must be a positive number"),
    "heads do not divide dim": (["model.key_dim=null", "model.num_heads=5"],
                                "model.num_heads=5 does not divide model.dim=32"),
    "wandb mode": (["wandb.mode=sometimes"],
                   "wandb.mode='sometimes' is not one of online, offline, disabled"),
    "image folder without path": (["dataset=image_folder"],
                                  "dataset=image_folder needs dataset.path="),
    "missing image folder": (["dataset=image_folder", "dataset.path=/no/such/folder"],
                             "dataset.path=/no/such/folder does not exist"),
}


def assert_refused(result, message, tmp_path):
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert message in out, out[-2000:]
    assert "Epoch 1" not in out
    assert not list(tmp_path.rglob("run.json"))


@pytest.mark.parametrize("overrides, message", CASES.values(), ids=CASES.keys())
def test_bad_value_is_refused_before_training(tmp_path, overrides, message):
    result = run_cli("experiment=smoke", f"results_dir={tmp_path}", "wandb.mode=offline",
                     *overrides)
    assert_refused(result, message, tmp_path)
    line = next(line for line in (result.stdout + result.stderr).splitlines() if message in line)
    assert len(line) < 300  # one line, not a traceback


def test_bad_value_late_in_a_sweep_stops_it_before_the_first_job(tmp_path):
    result = run_cli("-m", "experiment=smoke", f"results_dir={tmp_path}", "trainer.epochs=1",
                     "lsa=true,false", "spt=true,maybe")
    assert_refused(result, "spt='maybe' is not a boolean", tmp_path)


def test_class_folder_without_readable_images(tmp_path):
    data = tmp_path / "data"
    (data / "cats").mkdir(parents=True)
    (data / "dogs").mkdir()
    Image.fromarray(np.zeros((8, 8, 3), "uint8")).save(data / "cats" / "a.png")
    (data / "dogs" / "broken.png").write_bytes(b"\x89PNG not really")
    out = tmp_path / "out"
    result = run_cli("experiment=smoke", f"results_dir={out}", "dataset=image_folder",
                     f"dataset.path={data}")
    assert_refused(result, f"class folder {data}/dogs has no readable images", out)


def test_truncated_cifar_archive(tmp_path):
    archive = tmp_path / "cifar-10-python.tar.gz"
    make_cifar_archive(archive, fine=False)
    archive.write_bytes(archive.read_bytes()[:5000])
    out = tmp_path / "out"
    result = run_cli("experiment=smoke", f"results_dir={out}", "dataset=cifar10",
                     f"dataset.path={archive}")
    assert_refused(result, "is not a readable cifar-10-batches-py archive", out)
