"""Saving and reading a record (ablation/runs/record.py): when the disk refuses it (a
full disk, a file-size limit) what fits is written and says what it leaves out, and
when nothing fits the metrics are in the log line; reading refuses links, FIFOs and
files too large."""
import json
import os

import pytest


SAVE_UNDER_LIMIT = """
import json, logging, resource, sys
from ablation.runs.record import save_record
logging.basicConfig(level=logging.WARNING, format="%(message)s")
record = json.load(open(sys.argv[1]))
limit = int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    print("whole" if save_record(sys.argv[2], record) else "compact")
except OSError as e:
    print("nothing", e.errno)
"""


@pytest.mark.slow
def test_a_record_the_disk_refuses_keeps_what_was_measured(smoke_sweep, tmp_path):
    """A file-size limit (as a full disk would) refuses the whole record: what
    fits is written, and says what was left out; nothing fits: the metrics are
    in the log line and the error is raised."""
    import subprocess
    import sys

    from ablation.runs.record import read_record

    (source,) = list(smoke_sweep.root.glob("smoke/spt+lsa+temp-s0*/run.json"))
    whole = json.loads(source.read_text())
    size = len(source.read_bytes())
    compact = {k: v for k, v in whole.items() if k not in ("history", "diagnostics")}
    limit = len(json.dumps(compact, indent=2)) + 400
    assert limit < size

    def save(folder, limit):
        folder.mkdir()
        return subprocess.run([sys.executable, "-c", SAVE_UNDER_LIMIT, str(source), str(folder),
                               str(limit)], capture_output=True, text=True, timeout=120)

    done = save(tmp_path / "a", limit)
    assert done.stdout.split() == ["compact"], done.stderr
    kept = read_record(tmp_path / "a" / "run.json")
    assert kept["status"] == "completed" and kept["metrics"] == whole["metrics"]
    assert kept["epochs_completed"] == whole["epochs_completed"] > 0
    assert kept["unsaved"] == ["history", "diagnostics"] and "File too large" in kept["save_error"]
    assert "written without: history, diagnostics" in done.stderr

    done = save(tmp_path / "b", 64)
    assert done.stdout.split()[0] == "nothing", done.stderr
    assert not (tmp_path / "b" / "run.json").exists() and not list((tmp_path / "b").iterdir())
    assert "no record could be written" in done.stderr
    assert json.dumps(whole["metrics"]["test_top1"]) in done.stderr


def test_reading_refuses_links_fifos_and_huge_files(tmp_path):
    from ablation.files import UnsafeFile
    from ablation.runs.record import RecordError, read_record, read_state

    os.mkfifo(tmp_path / "run.json")  # opened for reading, a FIFO would wait forever
    with pytest.raises(RecordError, match="not a regular file"):
        read_record(tmp_path / "run.json")
    (tmp_path / "checkpoint").mkdir()
    with open(tmp_path / "checkpoint" / "state.json", "wb") as f:
        f.truncate(65 * 2**20)  # sparse: costs no disk
    assert read_state(tmp_path / "checkpoint") is None
    os.symlink(tmp_path / "elsewhere.json", tmp_path / "link.json")
    with pytest.raises(RecordError, match="symbolic link"):
        read_record(tmp_path / "link.json")
    assert issubclass(UnsafeFile, OSError)
