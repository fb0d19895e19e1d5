"""The trained model a completed job leaves: it loads with one call and
reproduces its record's test accuracy."""
from __future__ import annotations

import os

import numpy as np
import pytest

from ablation.runs.record import find_records, read_record

pytestmark = pytest.mark.slow


def test_every_job_of_a_sweep_leaves_a_model_that_reproduces_its_record(smoke_sweep):
    from ablation.data import load_dataset_cached
    from ablation.model import attention_layers, load_model

    records = list(find_records(smoke_sweep.root))
    assert len(records) == 4
    for path in records:
        record = read_record(path)
        folder = os.path.dirname(path)
        assert record["model_file"] == "model.keras"
        assert not os.path.exists(os.path.join(folder, "checkpoint"))  # the model stays
        model = load_model(folder)
        data = load_dataset_cached(record["config"]["dataset"], record["seed"])
        result = model.evaluate(data.x_test, data.y_test, batch_size=64, verbose=0,
                                return_dict=True)
        metrics = record["metrics"]
        # the same weights on the same images: the same correct count, to float rounding
        assert result["top1"] == pytest.approx(metrics["test_top1"], abs=1e-6), record["run_name"]
        assert result["top5"] == pytest.approx(metrics["test_top5"], abs=1e-6), record["run_name"]
        assert result["loss"] == pytest.approx(metrics["test_loss"], rel=1e-4)
        # the switches survive the round trip: the LSA mask and the temperature
        layers = attention_layers(model)
        assert layers and all(a.mask_diagonal == record["switches"]["lsa"] for a in layers)
        assert all((a.temperature is not None) == record["switches"]["learnable_temperature"]
                   for a in layers)


def test_a_missing_model_is_a_clear_error(tmp_path):
    from ablation.model import load_model

    with pytest.raises(FileNotFoundError, match="trainer.save_model=true"):
        load_model(tmp_path)


def test_a_saved_model_has_no_optimizer_state_and_predicts_the_same(tmp_path):
    import keras

    from ablation.config import compose
    from ablation.model import build_model, load_model
    from ablation.model.saved import save_trained
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(compose(["experiment=smoke"]), resolve=True)
    images = np.random.default_rng(0).random((6, 8, 8, 1), dtype=np.float32)
    model = build_model(cfg, 10, (8, 8, 1), normalization_data=images)
    model.compile(optimizer=keras.optimizers.AdamW(), loss="mse")
    model.fit(images, np.zeros((6, 10), "float32"), epochs=1, verbose=0)  # optimizer has state
    path = save_trained(model, tmp_path / "model.keras")
    assert sorted(os.listdir(tmp_path)) == ["model.keras"]  # no temporary file left
    model.save(tmp_path / "compiled.keras")  # Keras's own save keeps AdamW's two moments
    assert path.stat().st_size < 0.5 * (tmp_path / "compiled.keras").stat().st_size
    loaded = load_model(path, compile=False)
    assert getattr(loaded, "optimizer", None) is None
    np.testing.assert_array_equal(loaded.predict(images, verbose=0),
                                  model.predict(images, verbose=0))


def test_wandb_log_model_makes_the_file_a_model_artifact_of_the_run(tmp_path, wandb_cli):
    import json
    import subprocess

    import wandb

    from ablation.runs.tracking import WandbTracker

    model_file = tmp_path / "model.keras"
    model_file.write_bytes(b"weights" * 100)
    run = wandb.init(mode="offline", dir=str(tmp_path), project="vit-ablation-test",
                     name="spt+lsa+temp-s0", group="smoke", settings=wandb.Settings(silent=True))
    WandbTracker(run, tmp_path).model(model_file)
    run.finish()
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    stream = subprocess.run([wandb_cli, "leet", "inspect", str(run_dir), "--json"],
                            capture_output=True, text=True, check=True).stdout
    (artifact,) = [json.loads(line)["artifact"] for line in stream.splitlines()
                   if line.strip() and json.loads(line).get("type") == "artifact"]
    assert artifact["type"] == "model" and artifact["name"] == f"model-{run.id}"
    assert json.loads(artifact["metadata"]) == {"run_name": "spt+lsa+temp-s0", "group": "smoke"}
    assert "'path': 'model.keras'" in str(artifact["manifest"])
    assert f"'size': '{model_file.stat().st_size}'" in str(artifact["manifest"])


def test_a_damaged_model_or_a_sweep_folder_is_a_clear_error(tmp_path):
    from ablation.model import load_model

    job = tmp_path / "smoke" / "vit-s0"
    job.mkdir(parents=True)
    (job / "model.keras").write_text("not a model")
    with pytest.raises(ValueError, match="not a readable Keras model.*resume=false"):
        load_model(job)
    with pytest.raises(FileNotFoundError, match="is a sweep folder: .* vit-s0; pass one job"):
        load_model(tmp_path / "smoke")


def test_a_save_that_fails_keeps_the_runs_numbers(tmp_path, monkeypatch, caplog):
    """A full disk at the final save: the run's measured numbers stay in a completed
    record, with why there is no model, in one line."""
    import errno

    from ablation.job import run_job
    from tests.helpers.config import compose

    def full_disk(model, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr("ablation.train.fit.save_trained", full_disk)
    job = tmp_path / "job"
    with caplog.at_level("WARNING"):
        run_job(compose("experiment=smoke", "wandb.mode=disabled", "trainer.verbose=0",
                        "trainer.epochs=1"), job)
    record = read_record(job / "run.json")
    assert record["status"] == "completed" and record["metrics"]["test_top1"] > 0.5
    assert record["model_file"] is None and not (job / "model.keras").exists()
    assert record["model_error"].startswith("OSError") and "No space left" in record["model_error"]
    assert "\n" not in record["model_error"]
    assert any("was not saved" in r.getMessage() for r in caplog.records)
    assert (job / "checkpoint" / "state.json").exists()  # kept: the rerun saves from it

    # the rerun, with space again, saves the model from the final checkpoint and
    # trains nothing: the record's numbers are the first run's, and the model gives them
    monkeypatch.undo()
    run_job(compose("experiment=smoke", "wandb.mode=disabled", "trainer.verbose=0",
                    "trainer.epochs=1"), job)
    again = read_record(job / "run.json")
    assert again["model_file"] == "model.keras" and "model_error" not in again
    assert {k: v for k, v in again.items() if k != "model_file"} == {
        k: v for k, v in record.items() if k not in ("model_file", "model_error")}
    assert not (job / "checkpoint").exists()
    from ablation.data import load_dataset_cached
    from ablation.model import load_model

    data = load_dataset_cached(compose("experiment=smoke")["dataset"], 0)
    _, top1, _ = load_model(job).evaluate(data.x_test, data.y_test, verbose=0)
    assert top1 == pytest.approx(record["metrics"]["test_top1"], abs=1e-6)
