"""Data files never run code or stall a run, and a run's data identity covers
exactly what was read.

CIFAR's python batches are pickles: they are read by an unpickler that builds
plain containers, bytes, numbers and numpy arrays only, and a batch that is not
well formed is one line naming the file. Image folders are read and
fingerprinted by one walk, links followed: re-pointing a linked class folder
changes the fingerprint. FIFOs, sockets and devices are never opened, in a
folder or as ``dataset.path``.

Everything that could hang on the code before this (a FIFO opened, /dev/zero
hashed) runs in a child process with a timeout, and every test here runs under
an alarm, so a hang fails the test instead of blocking the suite.
"""
import hashlib
import io
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import textwrap

import numpy as np
import pytest
from PIL import Image

from ablation.data import DataError, load_dataset
from ablation.data.formats import read_cifar
from tests.helpers.archives import cifar_batch, make_cifar_archive
from tests.helpers.commands import run_cli
from tests.helpers.config import compose
from tests.helpers.paths import ROOT

ALARM_S = 300


class Hung(BaseException):  # not an Exception: nothing on the way may swallow it
    pass


@pytest.fixture(autouse=True)
def alarm():
    """A test still running after ALARM_S seconds fails instead of blocking."""
    def hung(signum, frame):
        raise Hung(f"still running after {ALARM_S} s: a read that blocks or never ends")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(ALARM_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def in_child(code: str, timeout: int = 60) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python with this checkout importable; a hang fails the test."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: still running after {timeout} s")


def one_line_error(error) -> str:
    message = str(error.value)
    assert "\n" not in message and len(message) < 400, message
    return message


# --- CIFAR batches run no code ----------------------------------------------

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


# --- FIFOs, sockets, devices -------------------------------------------------

def image_folder(root, classes=("a", "b"), count=3, seed=0):
    rng = np.random.default_rng(seed)
    for name in classes:
        (root / name).mkdir(parents=True)
        for i in range(count):
            Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(
                root / name / f"{i}.png")
    return root


def test_a_fifo_or_socket_among_the_images_is_skipped_by_reason_never_opened(tmp_path):
    root = image_folder(tmp_path / "images")
    os.mkfifo(root / "a" / "x.png")  # opening it for reading waits for a writer, forever
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "b" / "y.jpg"))
    try:
        result = in_child(f"""
            import logging
            from pathlib import Path
            logging.basicConfig(level=logging.WARNING, format="%(message)s")
            from ablation.data import load_dataset
            from ablation.data.fingerprint import data_fingerprint
            cfg = {{"name": "image_folder", "path": {str(root)!r}, "image_size": 8,
                    "channels": 3, "test_fraction": 0.34, "split_seed": 0,
                    "validation_fraction": 0.2, "limit_train": None, "limit_test": None}}
            data = load_dataset(cfg, 0)
            print("images", len(data.x_train) + len(data.x_val) + len(data.x_test))
            print(data_fingerprint(cfg)["source"])
        """)
    finally:
        server.close()
    assert result.returncode == 0, result.stderr[-3000:]
    assert "images 6" in result.stdout and f"{root} (6 files)" in result.stdout
    (line,) = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert "skipped 2 file(s)" in line
    assert "2 not regular files (FIFOs, sockets or devices: never opened) (e.g. a/x.png, b/y.jpg)" \
        in line


@pytest.mark.parametrize("dataset", ["cifar10", "image_folder", "fashion_mnist"])
@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_device_or_fifo_as_dataset_path_is_refused_in_one_line(tmp_path, dataset, special):
    path = special
    if special == "fifo":
        path = str(tmp_path / "cifar-10-python.tar.gz")
        os.mkfifo(path)
    what = "a character device" if special == "/dev/zero" else "a FIFO (named pipe)"
    result = in_child(f"""
        from ablation.data import DataError, check_source, load_dataset
        from ablation.data.fingerprint import data_fingerprint
        cfg = {{"name": {dataset!r}, "path": {path!r}, "image_size": 8, "channels": 3,
                "test_fraction": 0.3, "split_seed": 0, "validation_fraction": 0.2}}
        for step in (check_source, data_fingerprint, lambda cfg: load_dataset(cfg, 0)):
            try:
                step(cfg)
            except DataError as e:
                print("refused:", e)
            else:
                print("not refused")
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("refused: ") for line in lines), lines
    assert lines[0] == (f"refused: dataset.path={path} is {what}, not a data file or folder: "
                        f"point it at the archive or folder")


def test_the_command_refuses_dev_zero_as_dataset_path_at_once(tmp_path):
    result = run_cli("experiment=smoke", f"results_dir={tmp_path}/out", "dataset=cifar10",
                     "dataset.path=/dev/zero", "wandb.mode=disabled", timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out[-3000:]
    (line,) = [line for line in out.splitlines() if "dataset.path=/dev/zero" in line]
    assert line.startswith("error: ") and "is a character device" in line
    assert not (tmp_path / "out").exists()


def test_fifos_among_cifar_batches_and_idx_files_are_refused_not_waited_on(tmp_path):
    cifar = tmp_path / "cifar"
    make_cifar_archive(tmp_path / "c.tar.gz", fine=False)
    with tarfile.open(tmp_path / "c.tar.gz") as tar:
        tar.extractall(cifar, filter="data")
    (cifar / "cifar-10-batches-py" / "test_batch").unlink()
    os.mkfifo(cifar / "cifar-10-batches-py" / "test_batch")
    idx = tmp_path / "idx"
    idx.mkdir()
    for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        os.mkfifo(idx / f"{stem}.gz")
    result = in_child(f"""
        from ablation.data import DataError
        from ablation.data.formats import read_cifar, read_idx_folder
        for read in (lambda: read_cifar({str(cifar)!r}, fine=False),
                     lambda: read_idx_folder({str(idx)!r})):
            try:
                read()
            except DataError as e:
                print("refused:", e)
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all("is a FIFO (named pipe), not a regular file" in line
                                   for line in lines), lines


def test_reads_are_capped(tmp_path):
    import gzip

    from ablation import files
    from ablation.data import raw_files

    big = tmp_path / "big"
    big.write_bytes(b"x" * 2000)
    with pytest.raises(files.TooBig):
        files.read_bytes(big, 1000, follow_links=True)
    bomb = tmp_path / "bomb.gz"
    with gzip.open(bomb, "wb") as f:
        f.write(bytes(10 << 20))  # 10 MB of zeros in a few kB
    assert bomb.stat().st_size < 100_000
    with pytest.raises(files.TooBig, match="decompressed"):
        raw_files.read_gzip(bomb, limit=1 << 20)
    with pytest.raises(files.NotAFile, match="a character device"):
        files.open_file("/dev/zero", raw_files.MAX_FILE_BYTES, follow_links=True)


# --- the fingerprint covers what was read, by the same walk -------------------

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
