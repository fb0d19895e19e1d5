"""Every loader on real files or files made in the real format."""
import gzip
import logging
import struct
import tarfile

import numpy as np
import pytest
from PIL import Image

from ablation.data import DataError, load_dataset
from ablation.data.datasets import _download
from ablation.data.formats import read_cifar, read_idx_folder
from tests.helpers.archives import make_cifar_archive
from tests.helpers.commands import run_cli
from tests.helpers.config import compose
from tests.helpers.paths import FASHION_MNIST


@pytest.mark.parametrize("fine", [True, False])
def test_cifar_reader_reads_the_official_archive_format(tmp_path, fine):
    archive = tmp_path / ("cifar-100-python.tar.gz" if fine else "cifar-10-python.tar.gz")
    x_train, y_train, x_test, y_test = make_cifar_archive(archive, fine)
    got = read_cifar(archive, fine)
    np.testing.assert_array_equal(got[0], x_train)
    np.testing.assert_array_equal(got[1], y_train)
    np.testing.assert_array_equal(got[2], x_test)
    np.testing.assert_array_equal(got[3], y_test)
    assert got[4][:2] == ["class0", "class1"]
    # the extracted folder reads the same
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "extracted", filter="data")
    np.testing.assert_array_equal(read_cifar(tmp_path / "extracted", fine)[0], x_train)


def test_cifar_dataset_from_a_local_path_splits_by_seed(tmp_path):
    archive = tmp_path / "cifar-100-python.tar.gz"
    make_cifar_archive(archive, True, n_train=50)
    cfg = compose(f"dataset.path={archive}").dataset
    a, b, c = load_dataset(cfg, seed=0), load_dataset(cfg, seed=0), load_dataset(cfg, seed=1)
    assert a.input_shape == (32, 32, 3) and a.num_classes == 100
    assert (len(a.x_train), len(a.x_val), len(a.x_test)) == (45, 5, 10)
    np.testing.assert_array_equal(a.x_val, b.x_val)
    assert not np.array_equal(a.x_val, c.x_val)
    np.testing.assert_array_equal(a.x_test, c.x_test)  # the test split never depends on the seed


def test_truncated_cifar_archive_is_a_clear_error(tmp_path):
    archive = tmp_path / "cifar-100-python.tar.gz"
    make_cifar_archive(archive, True)
    archive.write_bytes(archive.read_bytes()[:3000])
    with pytest.raises(DataError, match="not a readable cifar-100-python archive"):
        read_cifar(archive, fine=True)


@pytest.mark.slow
def test_cifar_download_failing_offline_stops_before_training(tmp_path):
    # A real download attempt through a proxy that refuses: the network path, no mock.
    refused = "http://127.0.0.1:9"
    result = run_cli("dataset=cifar100", "model=tiny", "wandb.mode=offline",
                     f"results_dir={tmp_path}/results",
                     env={"KERAS_HOME": str(tmp_path / "keras"), "https_proxy": refused,
                          "HTTPS_PROXY": refused, "http_proxy": refused, "HTTP_PROXY": refused},
                     timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "could not download CIFAR-100" in out and "dataset.path" in out
    assert "Epoch 1" not in out
    assert result.returncode == 2
    # one complete line that ends in what to do, and no folder left behind
    (line,) = [line for line in out.splitlines() if "could not download" in line]
    assert line.endswith("dataset=fashion_mnist (Debian's dataset-fashion-mnist)")
    assert not (tmp_path / "results").exists()


def write_idx(path, array):
    header = struct.pack(">BBBB", 0, 0, 8, array.ndim) + b"".join(
        struct.pack(">I", d) for d in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_idx_reader_and_truncation(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (6, 28, 28))
    labels = rng.integers(0, 10, 6)
    for prefix in ("train", "t10k"):
        write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", labels)
    x_train, y_train, _, _ = read_idx_folder(tmp_path)
    np.testing.assert_array_equal(x_train[..., 0], images)
    np.testing.assert_array_equal(y_train, labels)
    raw = gzip.decompress((tmp_path / "t10k-images-idx3-ubyte.gz").read_bytes())
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(raw[:-100]))
    with pytest.raises(DataError, match="truncated"):
        read_idx_folder(tmp_path)


@pytest.mark.skipif(not FASHION_MNIST.is_dir(),
                    reason="needs Debian's dataset-fashion-mnist (.ci/run installs it)")
def test_real_fashion_mnist_from_the_debian_package():
    data = load_dataset(compose("dataset=fashion_mnist").dataset, seed=0)
    assert (len(data.x_train) + len(data.x_val), len(data.x_test)) == (60_000, 10_000)
    assert data.input_shape == (28, 28, 1) and data.num_classes == 10
    assert sorted(np.unique(data.y_test)) == list(range(10))
    assert 70 < data.x_train.mean() < 80  # Fashion-MNIST's mean pixel is about 72.9


def test_digits_ships_with_scikit_learn():
    data = load_dataset(compose("dataset=digits").dataset, seed=0)
    assert data.input_shape == (8, 8, 1) and data.num_classes == 10
    assert len(data.x_train) + len(data.x_val) + len(data.x_test) == 1797


def test_image_folder_any_size_grayscale_and_corrupt_files(tmp_path, caplog):
    rng = np.random.default_rng(0)
    for split, count in (("train", 4), ("test", 2)):
        for cls in ("cat", "dog"):
            folder = tmp_path / split / cls
            folder.mkdir(parents=True)
            for i in range(count):
                size = (20 + 7 * i, 30)  # images of different sizes
                Image.fromarray(rng.integers(0, 256, (*size[::-1], 3), dtype=np.uint8)).save(
                    folder / f"{i}.png")
    (tmp_path / "train" / "cat" / "broken.jpg").write_bytes(b"not an image")
    cfg = compose("dataset=image_folder", f"dataset.path={tmp_path}", "dataset.image_size=16",
                  "dataset.channels=1", "dataset.validation_fraction=0.25").dataset
    data = load_dataset(cfg, seed=0)
    assert data.class_names == ["cat", "dog"]
    assert data.input_shape == (16, 16, 1)
    assert (len(data.x_train), len(data.x_val), len(data.x_test)) == (6, 2, 4)
    assert "1 unreadable (e.g. cat/broken.jpg)" in caplog.text


def test_image_folder_errors(tmp_path):
    with pytest.raises(DataError, match="needs dataset.path"):
        load_dataset(compose("dataset=image_folder").dataset, seed=0)
    with pytest.raises(DataError, match="is not a folder"):
        load_dataset(compose("dataset=image_folder", f"dataset.path={tmp_path}/nope").dataset, 0)
    (tmp_path / "empty_class").mkdir()
    (tmp_path / "full").mkdir()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "full" / "a.png")
    with pytest.raises(DataError, match="empty_class has no readable images"):
        load_dataset(compose("dataset=image_folder", f"dataset.path={tmp_path}").dataset, 0)


def test_the_process_cache_loads_a_dataset_once_and_hands_out_read_only_arrays():
    from ablation.data import load_dataset_cached

    cfg = compose("dataset=digits").dataset
    first = load_dataset_cached(cfg, seed=0)
    assert load_dataset_cached(cfg, seed=0) is first
    assert not first.x_train.flags.writeable
    with pytest.raises(ValueError):
        first.x_train[0, 0, 0, 0] = 1.0
    other = load_dataset_cached(cfg, seed=1)  # another split: loaded anew
    assert other is not first
    np.testing.assert_array_equal(np.sort(other.y_test), np.sort(first.y_test))


def test_data_refusals_are_one_complete_line(tmp_path):
    def offline():
        raise Exception("URL fetch failure on https://www.cs.toronto.edu/~kriz/cifar-10-python"
                        ".tar.gz: None -- [Errno -2] Name or service not known\nmore\n" + "x" * 300)
    with pytest.raises(DataError) as error:
        _download("CIFAR-10", offline)
    message = str(error.value)
    assert "\n" not in message and "Name or service not known" in message
    assert message.endswith("dataset=fashion_mnist (Debian's dataset-fashion-mnist)")
    not_a_tar = tmp_path / "cifar-10-python.tar.gz"
    not_a_tar.write_bytes(b"this is not an archive at all" * 10)
    with pytest.raises(DataError) as error:
        read_cifar(not_a_tar, fine=False)
    assert "\n" not in str(error.value)
    assert str(error.value).endswith("re-download it or point dataset.path at a good copy")


def test_non_image_files_in_class_folders_are_counted(tmp_path, caplog):
    import numpy as np
    from PIL import Image

    from ablation.data.datasets import load_image_folder

    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(3):
            Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / cls / f"{i}.png")
    (tmp_path / "a" / "notes.txt").write_text("x")
    (tmp_path / "b" / "labels.txt").write_text("x")
    (tmp_path / "b" / "meta.csv").write_text("x")
    with caplog.at_level(logging.WARNING):
        load_image_folder({"path": str(tmp_path), "image_size": 8, "channels": 3,
                           "test_fraction": 0.34, "split_seed": 0})
    lines = [r.getMessage() for r in caplog.records if "not images" in r.getMessage()]
    assert len(lines) == 1 and "skipped 3 file(s)" in lines[0] and "1 .csv, 2 .txt" in lines[0]
