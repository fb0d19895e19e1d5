"""A dataset's raw files (ablation/data/raw_files.py, through ablation/files.py): FIFOs,
sockets and devices are never opened, in a folder or as ``dataset.path``, and every
read stops at a size cap.

What could hang on the code before this (a FIFO opened, /dev/zero hashed) runs in a
child process with a timeout.

Every test here runs under an alarm (the ``alarm`` fixture), so a read that hangs
fails the test instead of blocking the suite."""
import os
import socket
import subprocess
import sys
import tarfile
import textwrap

import pytest

from tests.helpers.archives import make_cifar_archive
from tests.helpers.commands import run_cli
from tests.helpers.images import image_folder
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("alarm")


def in_child(code: str, timeout: int = 60) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python with this checkout importable; a hang fails the test."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: still running after {timeout} s")


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
