"""Checkpoints (ablation/train/checkpoint.py): the two newest kept, weights, optimizer
and random states restored, files made with the umask's mode; and damaged state left
by a crash or a full disk (a checkpoint or state file that does not load, or was
tampered with, or is a link) set aside with one line, never silently ignored or
overwritten, the job resuming from what is intact.

Every test works on its own copy of one checkpoint trained once a session (the
``trained_checkpoint`` and ``checkpoint`` fixtures, tests/conftest.py)."""
import json
import logging

import pytest

from ablation.runs.record import read_state
from tests.helpers.files import file_modes


@pytest.mark.slow
def test_the_two_newest_checkpoints_are_kept_and_named(checkpoint):
    names = sorted(p.name for p in checkpoint.iterdir())
    assert names == ["model-2.keras", "model-3.keras", "state-2.json", "state-3.json",
                     "state.json"]
    assert json.loads((checkpoint / "state.json").read_text())["model"] == "model-3.keras"


@pytest.mark.slow
def test_a_truncated_newest_checkpoint_is_set_aside_and_the_one_before_used(
        checkpoint, tmp_path, caplog):
    from ablation.train.checkpoint import load_checkpoint

    folder = checkpoint
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
def test_a_stop_while_a_checkpoint_loads_sets_nothing_aside(checkpoint, tmp_path, monkeypatch):
    """A Ctrl-C while Keras builds the checkpoint's model reaches Python as a
    SystemError caused by it: a stop, not a checkpoint that does not load."""
    from ablation.train.checkpoint import load_checkpoint
    from tests.helpers.stops import native_error

    def stopped(*args, **kwargs):
        raise native_error(KeyboardInterrupt())

    folder = checkpoint
    before = sorted(p.name for p in folder.iterdir())
    monkeypatch.setattr("keras.saving.load_model", stopped)
    with pytest.raises(SystemError):
        load_checkpoint(folder, seed=0)
    assert sorted(p.name for p in folder.iterdir()) == before
    assert not (tmp_path / "job" / ".replaced").exists()


@pytest.mark.slow
def test_no_checkpoint_that_loads_means_starting_over_saying_so(checkpoint, tmp_path, caplog):
    from ablation.train.checkpoint import load_checkpoint

    folder = checkpoint
    for name in ("model-2.keras", "model-3.keras"):
        (folder / name).write_bytes(b"PK\x03\x04 not a whole archive")
    with caplog.at_level(logging.WARNING):
        assert load_checkpoint(folder, seed=0) is None
    assert "no complete checkpoint is left: the job starts over" in caplog.text
    assert not list(folder.glob("model-*"))  # both set aside, neither deleted
    assert len(list(tmp_path.glob("job/.replaced/*/checkpoint/model-*.keras"))) == 2


@pytest.mark.slow
def test_a_damaged_state_file_is_set_aside_with_a_line(checkpoint, tmp_path, caplog):
    from ablation.runs.record import checkpoint_states

    folder = checkpoint
    (folder / "state.json").write_text('{"epoch": 3, "mod')  # cut short
    assert read_state(folder)["epoch"] == 3  # the per-epoch copy stands in
    states, damaged = checkpoint_states(folder)
    assert [s["epoch"] for s in states] == [3, 2]
    assert [(p.name, "not readable JSON" in why) for p, why in damaged] == [("state.json", True)]


@pytest.mark.slow
def test_a_damaged_state_file_is_reported_when_loading(checkpoint, tmp_path, caplog):
    from ablation.train.checkpoint import load_checkpoint

    folder = checkpoint
    (folder / "state.json").write_bytes(b"\x00" * 10)
    with caplog.at_level(logging.WARNING):
        assert load_checkpoint(folder, seed=0).epoch == 3
    assert "checkpoint/state.json is unreadable (not readable JSON" in caplog.text
    assert list(tmp_path.glob("job/.replaced/*/checkpoint/state.json"))


@pytest.mark.slow
@pytest.mark.parametrize("tamper, says", [
    (lambda f: f.update(epoch=4, model="model-4.keras", history=[*f["history"], {"epoch": 4}]),
     "it claims epoch 4 of a 3-epoch run"),
    (lambda f: f.update(epoch=10**9, model="model-1000000000.keras"), "its history does not"),
    (lambda f: f.update(model=".."), "not a checkpoint state"),
    (lambda f: f.update(history=f["history"][:1]), "its history does not hold"),
    (lambda f: f.update(fit_seconds=-5.0), "its training time is negative"),
    (lambda f: f.update(train_phase_seconds=[float("nan")]), "not a number"),
    (lambda f: f.update(attempt_starts=[0, 7]), "its resume points lie outside its epochs"),
    (lambda f: f.update(wandb_id="../x/y"), "its W&B run id '../x/y' is not a plain name"),
    (lambda f: f["history"][0].update(epoch=7), "its history does not hold its 3 epoch(s), in"),
    (lambda f: f["history"][0].update({"val/top1": float("nan")}), "its history is not a rec"),
    (lambda f: f["history"][1].update({"val/top1": 1.5}), "its history is not a record's"),
    (lambda f: f.update(seed_states=[[2**70, 0]]), "random-generator states are not lists of"),
    (lambda f: f.update(seed_states=[[-5, 0]]), "random-generator states are not lists of"),
], ids=["epoch past the run", "epoch past any history", "model named ..", "short history", "negative time",
        "time not a number", "resume point past the state", "W&B id a path", "epochs out of order",
        "NaN in history", "accuracy past 1", "seed state past int64", "negative seed state"])
def test_a_tampered_state_is_set_aside_and_an_older_one_used(checkpoint, tmp_path, caplog,
                                                              tamper, says):
    from ablation.train.checkpoint import load_checkpoint

    folder = checkpoint
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
def test_a_state_for_another_models_random_generators_is_set_aside(checkpoint, tmp_path, caplog):
    from ablation.train.checkpoint import load_checkpoint

    folder = checkpoint
    for name in ("state.json", "state-3.json"):
        state = json.loads((folder / name).read_text())
        assert state["seed_states"]  # the smoke model's dropout and augmentation
        state["seed_states"] = state["seed_states"][:-1]
        (folder / name).write_text(json.dumps(state))
    with caplog.at_level(logging.WARNING):
        loaded = load_checkpoint(folder, seed=0, epochs=3)
    assert loaded is not None and loaded.epoch == 2
    (line,) = [r.getMessage() for r in caplog.records if "random-generator states" in r.getMessage()]
    assert "model-3.keras does not load" in line and "resuming from epoch 2" in line
    assert sorted(p.name for p in folder.iterdir()) == ["model-2.keras", "state-2.json"]


@pytest.mark.slow
def test_a_checkpoint_that_is_a_link_is_never_loaded(checkpoint, tmp_path, caplog):
    from ablation.train.checkpoint import load_checkpoint

    folder = checkpoint
    outside = tmp_path / "elsewhere.keras"
    (folder / "model-3.keras").rename(outside)
    (folder / "model-3.keras").symlink_to(outside)
    with caplog.at_level(logging.WARNING):
        loaded = load_checkpoint(folder, seed=0, epochs=3)
    assert loaded is not None and loaded.epoch == 2
    assert any("model-3.keras is not a regular file" in r.getMessage() for r in caplog.records)
    assert outside.exists()  # the link was set aside, not what it points at


@pytest.mark.slow
def test_checkpoint_restores_weights_optimizer_and_random_states(trained_checkpoint, checkpoint):
    import keras
    import numpy as np

    from ablation.train.checkpoint import load_checkpoint, seed_states

    trained = trained_checkpoint.reference  # the model in memory when training ended
    loaded = load_checkpoint(checkpoint, seed=0)
    assert loaded.epoch == trained["epochs"] and loaded.state["wandb_id"] == "x"
    assert len(loaded.model.weights) == len(trained["weights"])
    for a, b in zip(trained["weights"], loaded.model.weights):
        np.testing.assert_array_equal(a, keras.ops.convert_to_numpy(b))
    assert int(loaded.model.optimizer.iterations) == trained["iterations"] > 0
    states = trained["seed_states"]
    assert len(states) >= 3 and any(s[1] > 0 for s in states)  # they advanced in training
    assert [keras.ops.convert_to_numpy(v).tolist() for v in seed_states(loaded.model)] == states


def test_checkpoint_files_get_the_umask_mode(tmp_path, umask_027):
    import keras

    from ablation.train.checkpoint import EpochCheckpoint

    class Metrics:
        def state(self):
            return {}

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    callback = EpochCheckpoint(tmp_path / "checkpoint", Metrics(), {})
    callback.set_model(model)
    callback.on_epoch_end(0, {"loss": 1.0})
    modes = file_modes(tmp_path / "checkpoint")
    assert set(modes) == {"model-1.keras", "state-1.json", "state.json"}
    assert set(modes.values()) == {umask_027}, modes
