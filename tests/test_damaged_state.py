"""Damaged state left by a crash or a full disk: a checkpoint or state file that
does not load, an unreadable record. Each is set aside with one line, never
silently ignored or overwritten, and the job resumes from what is intact."""
import json
import logging

import pytest

from ablation.runs.record import RECORD_FILENAME, read_state


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Three epochs of the smoke model, checkpointed as a run does."""
    from omegaconf import OmegaConf

    from ablation.data import load_dataset
    from ablation.model import build_model
    from ablation.train.checkpoint import EpochCheckpoint
    from ablation.train.epoch_metrics import EpochMetrics
    from ablation.train.compile import compile_model
    from tests.helpers.config import compose

    folder = tmp_path_factory.mktemp("job") / "checkpoint"
    cfg = OmegaConf.to_container(compose("experiment=smoke", "dataset.limit_train=128"),
                                 resolve=True)
    data = load_dataset(cfg["dataset"], 0)
    model = build_model(cfg, 10, data.input_shape, normalization_data=data.x_train)
    compile_model(model, cfg["trainer"], 3, 10)
    metrics = EpochMetrics()
    model.fit(data.x_train, data.y_train, batch_size=64, epochs=3, verbose=0,
              callbacks=[metrics, EpochCheckpoint(folder, metrics, extra={"wandb_id": "x"})])
    return folder


def _copy(folder, tmp_path):
    import shutil

    job = tmp_path / "job"
    shutil.copytree(folder, job / "checkpoint")
    return job / "checkpoint"


@pytest.mark.slow
def test_the_two_newest_checkpoints_are_kept_and_named(checkpoints):
    names = sorted(p.name for p in checkpoints.iterdir())
    assert names == ["model-2.keras", "model-3.keras", "state-2.json", "state-3.json",
                     "state.json"]
    assert json.loads((checkpoints / "state.json").read_text())["model"] == "model-3.keras"


@pytest.mark.slow
def test_a_truncated_newest_checkpoint_is_set_aside_and_the_one_before_used(
        checkpoints, tmp_path, caplog):
    from ablation.train.checkpoint import load_checkpoint

    folder = _copy(checkpoints, tmp_path)
    data = (folder / "model-3.keras").read_bytes()
    (folder / "model-3.keras").write_bytes(data[: len(data) // 2])  # a crash mid-write
    with caplog.at_level(logging.WARNING):
        loaded = load_checkpoint(folder, seed=0)
    assert loaded is not None and loaded.epoch == 2
    (line,) = [r.getMessage() for r in caplog.records if "does not load" in r.getMessage()]
    assert "checkpoint/model-3.keras does not load" in line and "resuming from epoch 2" in line
    assert len(line.splitlines()) == 1
    moved = list(tmp_path.glob("job/.replaced/*/checkpoint/*"))
    assert {p.name for p in moved} == {"model-3.keras", "state-3.json", "state.json"}
    assert (moved[0].parent / "model-3.keras").read_bytes() == data[: len(data) // 2]


@pytest.mark.slow
def test_a_stop_while_a_checkpoint_loads_sets_nothing_aside(checkpoints, tmp_path, monkeypatch):
    """A Ctrl-C while Keras builds the checkpoint's model reaches Python as a
    SystemError caused by it: a stop, not a checkpoint that does not load."""
    from ablation.train.checkpoint import load_checkpoint
    from tests.helpers.stops import native_error

    def stopped(*args, **kwargs):
        raise native_error(KeyboardInterrupt())

    folder = _copy(checkpoints, tmp_path)
    before = sorted(p.name for p in folder.iterdir())
    monkeypatch.setattr("keras.saving.load_model", stopped)
    with pytest.raises(SystemError):
        load_checkpoint(folder, seed=0)
    assert sorted(p.name for p in folder.iterdir()) == before
    assert not (tmp_path / "job" / ".replaced").exists()


@pytest.mark.slow
def test_no_checkpoint_that_loads_means_starting_over_saying_so(checkpoints, tmp_path, caplog):
    from ablation.train.checkpoint import load_checkpoint

    folder = _copy(checkpoints, tmp_path)
    for name in ("model-2.keras", "model-3.keras"):
        (folder / name).write_bytes(b"PK\x03\x04 not a whole archive")
    with caplog.at_level(logging.WARNING):
        assert load_checkpoint(folder, seed=0) is None
    assert "no complete checkpoint is left: the job starts over" in caplog.text
    assert not list(folder.glob("model-*"))  # both set aside, neither deleted
    assert len(list(tmp_path.glob("job/.replaced/*/checkpoint/model-*.keras"))) == 2


@pytest.mark.slow
def test_a_damaged_state_file_is_set_aside_with_a_line(checkpoints, tmp_path, caplog):
    from ablation.train.checkpoint import checkpoint_states

    folder = _copy(checkpoints, tmp_path)
    (folder / "state.json").write_text('{"epoch": 3, "mod')  # cut short
    assert read_state(folder)["epoch"] == 3  # the per-epoch copy stands in
    states, damaged = checkpoint_states(folder)
    assert [s["epoch"] for s in states] == [3, 2]
    assert [(p.name, "not readable JSON" in why) for p, why in damaged] == [("state.json", True)]


@pytest.mark.slow
def test_a_damaged_state_file_is_reported_when_loading(checkpoints, tmp_path, caplog):
    from ablation.train.checkpoint import load_checkpoint

    folder = _copy(checkpoints, tmp_path)
    (folder / "state.json").write_bytes(b"\x00" * 10)
    with caplog.at_level(logging.WARNING):
        assert load_checkpoint(folder, seed=0).epoch == 3
    assert "checkpoint/state.json is unreadable (not readable JSON" in caplog.text
    assert list(tmp_path.glob("job/.replaced/*/checkpoint/state.json"))


def test_an_unreadable_record_is_set_aside_and_the_line_says_why(tmp_path, caplog):
    from ablation.job.lifecycle import set_aside_unreadable_record

    job = tmp_path / "vit-s0"
    job.mkdir()
    (job / RECORD_FILENAME).write_text('{"schema": 1, "status": "completed"')
    with caplog.at_level(logging.WARNING):
        set_aside_unreadable_record(job)
    assert not (job / RECORD_FILENAME).exists()
    (kept,) = job.glob(".replaced/*/run.json")
    assert kept.read_text() == '{"schema": 1, "status": "completed"'
    assert "the record is unreadable" in caplog.text and "the job runs again" in caplog.text


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


@pytest.mark.slow
@pytest.mark.parametrize("tamper, says", [
    (lambda f: f.update(epoch=10**9, model="model-1000000000.keras"), "it claims epoch"),
    (lambda f: f.update(model=".."), "not a checkpoint state"),
    (lambda f: f.update(history=f["history"][:1]), "its history does not hold"),
], ids=["epoch past the run", "model named ..", "short history"])
def test_a_tampered_state_is_set_aside_and_an_older_one_used(checkpoints, tmp_path, caplog,
                                                              tamper, says):
    from ablation.train.checkpoint import load_checkpoint

    folder = _copy(checkpoints, tmp_path)
    for name in ("state.json", "state-3.json"):
        state = json.loads((folder / name).read_text())
        tamper(state)
        (folder / name).write_text(json.dumps(state))
    with caplog.at_level(logging.WARNING):
        loaded = load_checkpoint(folder, seed=0, epochs=3)
    assert loaded is not None and loaded.epoch == 2
    lines = [r.getMessage() for r in caplog.records if says in r.getMessage()]
    assert len(lines) == 2 and all(len(line.splitlines()) == 1 for line in lines)
    assert (tmp_path / "job").is_dir() and sorted(p.name for p in folder.iterdir()) == [
        "model-2.keras", "model-3.keras", "state-2.json"]


@pytest.mark.slow
def test_a_checkpoint_that_is_a_link_is_never_loaded(checkpoints, tmp_path, caplog):
    from ablation.train.checkpoint import load_checkpoint

    folder = _copy(checkpoints, tmp_path)
    outside = tmp_path / "elsewhere.keras"
    (folder / "model-3.keras").rename(outside)
    (folder / "model-3.keras").symlink_to(outside)
    with caplog.at_level(logging.WARNING):
        loaded = load_checkpoint(folder, seed=0, epochs=3)
    assert loaded is not None and loaded.epoch == 2
    assert any("model-3.keras is not a regular file" in r.getMessage() for r in caplog.records)
    assert outside.exists()  # the link was set aside, not what it points at
