"""CIFAR's python batches (ablation/data/formats.py) run no code: they are read by an
unpickler that builds plain containers, bytes, numbers and numpy arrays only, and a
batch or archive that is not well formed is one line naming the file.

Every test here runs under an alarm (the ``alarm`` fixture), so a read that hangs
fails the test instead of blocking the suite."""
import io
import os
import pickle
import struct
import tarfile

import numpy as np
import pytest

from ablation.data import DataError
from ablation.data.formats import read_cifar
from tests.helpers.archives import cifar_batch, make_cifar_archive
from tests.helpers.commands import run_cli

pytestmark = pytest.mark.usefixtures("alarm")


def one_line_error(error) -> str:
    message = str(error.value)
    assert "\n" not in message and len(message) < 400, message
    return message


class Payload:
    """What a hostile batch could carry: unpickling it runs a shell command."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"echo ran > '{self.marker}'",)


def replace_member(archive, member, payload, out):
    """A copy of ``archive`` with one member's bytes replaced."""
    with tarfile.open(archive) as src, tarfile.open(out, "w:gz") as dst:
        for info in src.getmembers():
            data = src.extractfile(info).read()
            if info.name.endswith("/" + member):
                data = payload
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
    return out


@pytest.mark.parametrize("form", ["archive", "extracted folder"])
@pytest.mark.parametrize("where", ["the whole batch", "inside the batch"])
def test_a_batch_whose_pickle_would_run_code_is_refused_and_runs_nothing(tmp_path, form, where):
    marker = tmp_path / "marker"
    good = tmp_path / "good.tar.gz"
    make_cifar_archive(good, fine=False)
    evil = Payload(marker)
    payload = pickle.dumps(evil if where == "the whole batch" else
                           {b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 1],
                            b"filenames": [evil, b"x.png"]})
    path = replace_member(good, "data_batch_3", payload, tmp_path / "cifar-10-python.tar.gz")
    if form == "extracted folder":
        with tarfile.open(path) as tar:
            tar.extractall(tmp_path / "extracted", filter="data")
        path = tmp_path / "extracted"
    try:
        read_cifar(path, fine=False)
    except Exception as e:  # noqa: BLE001 - checked below, after the marker
        error = e
    else:
        error = None
    assert not marker.exists(), f"unpickling ran the batch's code: {marker.read_text()!r}"
    assert isinstance(error, DataError), repr(error)
    message = str(error)
    assert "\n" not in message and len(message) < 400, message
    assert "data_batch_3" in message and "is not a plain CIFAR batch" in message
    assert "asks to run posix.system" in message
    assert message.endswith("re-download it or point dataset.path at a good copy")


class Py2Pickler(pickle._Pickler):
    """Python 2's protocol 2 as the official batches were written: every str and
    bytes a Python 2 ``str`` (BINSTRING), numpy's rebuilder under numpy.core."""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_py2_str(self, obj):
        data = obj.encode("latin1") if isinstance(obj, str) else obj
        if len(data) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(data)]) + data)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(data)) + data)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str
    dispatch[str] = save_py2_str


def py2_dumps(obj) -> bytes:
    buf = io.BytesIO()
    Py2Pickler(buf, protocol=2).dump(obj)
    return buf.getvalue().replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")


def test_batches_pickled_as_the_official_python_2_files_are_read(tmp_path):
    """The globals the official batches name (numpy.core.multiarray._reconstruct,
    numpy.ndarray, numpy.dtype) are allowed; the strings come back as bytes."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    images = rng.integers(0, 256, (12, 3072), dtype=np.uint8)
    labels = [int(v) for v in rng.integers(0, 10, 12)]
    for i in range(1, 6):
        (folder / f"data_batch_{i}").write_bytes(py2_dumps(
            {"batch_label": "training batch", "labels": labels[i:i + 2],
             "data": images[i:i + 2], "filenames": ["a.png", "b.png"]}))
    (folder / "test_batch").write_bytes(py2_dumps({"labels": labels[:2], "data": images[:2]}))
    (folder / "batches.meta").write_bytes(py2_dumps(
        {"label_names": [f"c{i}" for i in range(10)], "num_vis": 3072}))
    assert b"cnumpy.core.multiarray\n_reconstruct" in (folder / "test_batch").read_bytes()
    x_train, y_train, x_test, y_test, names = read_cifar(tmp_path, fine=False)
    assert x_train.shape == (10, 32, 32, 3) and x_train.dtype == np.uint8
    np.testing.assert_array_equal(y_train, sum((labels[i:i + 2] for i in range(1, 6)), []))
    np.testing.assert_array_equal(x_test[0], images[0].reshape(3, 32, 32).transpose(1, 2, 0))
    assert names[:2] == ["c0", "c1"]


def batch(n=4, **change):
    """A CIFAR-10 batch's fields, with some changed or (value None) removed."""
    fields = {b"batch_label": b"t", b"labels": [i % 10 for i in range(n)],
              b"data": np.zeros((n, 3072), np.uint8), b"filenames": [b"x.png"] * n}
    for key, value in change.items():
        if value is None:
            fields.pop(key.encode())
        else:
            fields[key.encode()] = value
    return pickle.dumps(fields)


MALFORMED = {
    "not a dict": (pickle.dumps([1, 2, 3]), "a pickled list, not a dict"),
    "no data": (batch(data=None), "it has no b'data' entry"),
    "no labels": (batch(labels=None), "it has no b'labels' entry"),
    "float data": (batch(data=np.zeros((4, 3072), np.float32)),
                   "its b'data' is float32 (4, 3072), not uint8 rows of 3072 bytes"),
    "wrong row size": (batch(data=np.zeros((4, 1024), np.uint8)),
                       "its b'data' is uint8 (4, 1024), not uint8 rows"),
    "data a list": (batch(data=[0] * 3072), "its b'data' is list"),
    "labels not integers": (batch(labels=[b"cat"] * 4), "its b'labels' is not a list of integers"),
    "fewer labels than images": (batch(labels=[0, 1, 2]), "4 images but 3 labels"),
    "label outside the classes": (batch(labels=[0, 1, 2, 10]),
                                  "a label (0 to 10) outside its 10 classes"),
    "truncated pickle": (batch()[:200], "is not a readable CIFAR batch"),
}


@pytest.mark.parametrize("payload, expected", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_batch_is_one_line_naming_the_file(tmp_path, payload, expected):
    make_cifar_archive(tmp_path / "good.tar.gz", fine=False)
    archive = replace_member(tmp_path / "good.tar.gz", "data_batch_2", payload,
                             tmp_path / "cifar-10-python.tar.gz")
    with pytest.raises(DataError) as error:
        read_cifar(archive, fine=False)
    message = one_line_error(error)
    assert f"{archive}:cifar-10-batches-py/data_batch_2" in message, message
    assert expected in message, message
    assert message.endswith("re-download it or point dataset.path at a good copy")


def test_cifar_100_checks_its_fine_labels_and_meta(tmp_path):
    make_cifar_archive(tmp_path / "good.tar.gz", fine=True)
    missing = replace_member(tmp_path / "good.tar.gz", "train",
                             batch(labels=None), tmp_path / "a.tar.gz")  # no b'fine_labels'
    with pytest.raises(DataError, match="cifar-100-python/train is not a CIFAR batch: it has no "
                                        "b'fine_labels' entry"):
        read_cifar(missing, fine=True)
    bad_meta = replace_member(tmp_path / "good.tar.gz", "meta",
                              pickle.dumps({b"fine_label_names": "not a list"}),
                              tmp_path / "b.tar.gz")
    with pytest.raises(DataError, match="cifar-100-python/meta is not a CIFAR meta batch"):
        read_cifar(bad_meta, fine=True)


@pytest.mark.parametrize("damage", ["truncated", "member missing", "not an archive"])
def test_a_damaged_archive_is_one_line(tmp_path, damage):
    archive = tmp_path / "cifar-10-python.tar.gz"
    make_cifar_archive(archive, fine=False)
    if damage == "truncated":
        archive.write_bytes(archive.read_bytes()[:4000])
        expected = "is not a readable cifar-10-batches-py archive"
    elif damage == "member missing":
        with tarfile.open(tmp_path / "x.tar.gz", "w:gz") as tar:
            data = cifar_batch(np.zeros((1, 32, 32, 3), np.uint8), [0], fine=False)
            info = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        archive = tmp_path / "x.tar.gz"
        expected = "has no cifar-10-batches-py/data_batch_2"
    else:
        archive.write_bytes(b"\x00garbage" * 1000)
        expected = "is not a readable cifar-10-batches-py archive"
    with pytest.raises(DataError) as error:
        read_cifar(archive, fine=False)
    assert expected in one_line_error(error)


@pytest.mark.slow   # slower than a fast-lane test
def test_a_malformed_batch_stops_the_command_with_exit_2_before_training(tmp_path):
    """Through the real command line: the job's load refuses, exit 2, one line,
    nothing trained, and the hostile batch ran nothing."""
    marker = tmp_path / "marker"
    make_cifar_archive(tmp_path / "good.tar.gz", fine=False)
    archive = replace_member(tmp_path / "good.tar.gz", "data_batch_1",
                             pickle.dumps(Payload(marker)), tmp_path / "cifar-10-python.tar.gz")
    result = run_cli("experiment=smoke", f"results_dir={tmp_path}/out", "wandb.mode=disabled",
                     "dataset=cifar10", f"dataset.path={archive}", timeout=240)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out[-3000:]
    lines = [line for line in out.splitlines() if "is not a plain CIFAR batch" in line]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out, out
    assert "Epoch 1" not in out and not marker.exists()
    assert not (tmp_path / "out").exists()
