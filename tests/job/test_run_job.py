"""One training job: records, determinism, failure isolation, backends, real data."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ablation.runs.record import read_record
from ablation.job import run_job
from ablation.train.fit import TrainingDiverged
from tests.helpers.config import compose
from tests.helpers.paths import FASHION_MNIST, ROOT
from tests.helpers.wandb_runs import wandb_inspect


def smoke(*overrides):
    return compose("experiment=smoke", "trainer.epochs=2", "trainer.verbose=0", *overrides)


@pytest.mark.slow
def test_same_config_and_seed_give_the_same_metrics(tmp_path):
    def one_epoch(*overrides):  # the random layers (augmentation, dropout) and the data order
        return compose("experiment=smoke", "trainer.epochs=1", "trainer.verbose=0",
                       "wandb.mode=disabled", "diagnostics.enabled=false", "spt=true",
                       "lsa=true", "augmentation=keras_io", *overrides)

    first = run_job(one_epoch(), tmp_path / "a")
    second = run_job(one_epoch(), tmp_path / "b")
    assert first["status"] == second["status"] == "completed"
    assert first["metrics"] == second["metrics"]
    assert [r["train/loss"] for r in first["history"]] == [r["train/loss"] for r in second["history"]]
    other_seed = run_job(one_epoch("seed=1"), tmp_path / "c")
    assert other_seed["history"][0]["train/loss"] != first["history"][0]["train/loss"]


@pytest.mark.slow
def test_record_contents(smoke_sweep):
    """The shared smoke sweep's lsa+temp-s0: what the record holds, and what the
    command line said of it (the metrics run_job returned)."""
    (folder,) = smoke_sweep.root.glob("smoke/lsa+temp-s0*")
    record = read_record(folder / "run.json")
    metrics = record["metrics"]
    assert (f"lsa+temp-s0: test top-1 {100 * metrics['test_top1']:.2f}%, "
            f"top-5 {100 * metrics['test_top5']:.2f}% -> {folder}/run.json") in (
                smoke_sweep.result.stdout + smoke_sweep.result.stderr)
    assert record["switches"] == {"spt": False, "lsa": True, "learnable_temperature": True}
    assert record["run_name"] == "lsa+temp-s0" and record["variant"] == "lsa+temp"
    assert (record["dataset"], record["model"], record["seed"]) == ("digits", "tiny", 0)
    metrics = record["metrics"]
    assert all(0.0 <= metrics[k] <= 1.0 for k in ("test_top1", "test_top5", "best_val_top1"))
    assert metrics["test_top5"] >= metrics["test_top1"]
    assert metrics["test_top1"] > 0.3  # 10 classes: well above chance after 2 epochs
    assert [row["epoch"] for row in record["history"]] == [1, 2]
    first = record["history"][0]
    assert {"train/loss", "train/top1", "train/top5", "val/loss", "val/top1", "val/top5",
            "lr", "temperature/block_0", "temperature/block_1"} <= set(first)
    # warm-up then cosine decay, applied to the optimizer
    assert 0 < first["lr"] <= 0.003 and record["history"][1]["lr"] < first["lr"]
    assert record["params"] > 0 and record["train_images_per_s"] > 0
    assert record["config"]["trainer"]["epochs"] == 2
    assert record["wandb"]["mode"] == "offline"


@pytest.mark.slow
def test_failed_job_is_recorded_and_does_not_leak_into_the_next(tmp_path, wandb_cli):
    bad = smoke("wandb.mode=offline", "trainer.learning_rate=1e9", "trainer.warmup_fraction=0",
                "spt=false", "lsa=false")
    with pytest.raises(TrainingDiverged):
        run_job(bad, tmp_path / "bad")
    failed = read_record(tmp_path / "bad" / "run.json")
    assert failed["status"] == "failed"
    assert "TrainingDiverged" in failed["error"] and "traceback" in failed
    assert failed["epochs_completed"] == 0 and failed["history"] == []  # epoch 1 diverged
    assert not (tmp_path / "bad" / "checkpoint" / "state.json").exists()  # nothing to resume into
    good = run_job(smoke("wandb.mode=offline"), tmp_path / "good")
    assert good["status"] == "completed"
    assert good["wandb"]["id"] != failed["wandb"]["id"]

    bad_run = wandb_inspect(wandb_cli, tmp_path / "bad" / failed["wandb"]["dir"])
    good_run = wandb_inspect(wandb_cli, tmp_path / "good" / good["wandb"]["dir"])
    assert bad_run["exit_code"] != 0 and bad_run["state"] != "finished"
    assert "test/top1" not in bad_run["summary"]
    assert good_run["exit_code"] == 0 and good_run["state"] == "finished"
    assert good_run["summary"]["test/top1"] == pytest.approx(good["metrics"]["test_top1"])
    assert len(good_run["history_records"]) == 2  # its own two epochs, nothing from the failed job


@pytest.mark.slow
def test_a_job_starting_over_sets_aside_an_earlier_attempts_wandb_run(tmp_path):
    """Killed before its first checkpoint, a job starts over under a new W&B
    id; the killed attempt's offline folder (a near-empty .wandb file) moves to
    .replaced/, so `wandb sync <job>/wandb/offline-run-*` sends only the run
    the record describes."""
    job = tmp_path / "job"
    killed = job / "wandb" / "offline-run-20260101_000000-killed01"
    killed.mkdir(parents=True)
    (killed / "run-killed01.wandb").write_bytes(b"\0" * 7)
    record = run_job(smoke("wandb.mode=offline", "diagnostics.enabled=false"), job)
    assert record["status"] == "completed"
    (kept,) = job.glob("wandb/offline-run-*")
    assert kept.name.endswith(record["wandb"]["id"])
    (moved,) = job.glob(".replaced/*/wandb/offline-run-*-killed01")
    assert (moved / "run-killed01.wandb").read_bytes() == b"\0" * 7


BLOCK_TENSORFLOW = r'''
import importlib.abc, json, os, sys
class NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ImportError("TensorFlow is blocked in this test")
sys.meta_path.insert(0, NoTensorFlow())
os.environ["KERAS_BACKEND"] = "jax"
sys.path[:0] = [sys.argv[2]]
from tests.helpers.config import compose
from ablation.job import run_job
record = run_job(compose("experiment=smoke", "trainer.epochs=1", "trainer.verbose=0",
                         "wandb.mode=disabled", "augmentation=keras_io",
                         # Keras rotation/zoom run at ~14 img/s on JAX CPU: flip only
                         "augmentation.rotation=0", "augmentation.zoom=0"), sys.argv[1])
assert "tensorflow" not in sys.modules, "something imported TensorFlow"
assert "wandb" not in sys.modules, "wandb was imported with wandb.mode=disabled"
print(json.dumps({"backend": record["environment"]["backend"], "status": record["status"],
                  "top1": record["metrics"]["test_top1"]}))
'''


@pytest.mark.slow
def test_trains_on_jax_with_tensorflow_not_importable(tmp_path):
    pytest.importorskip("jax", reason="the test extra installs jax")
    result = subprocess.run([sys.executable, "-c", BLOCK_TENSORFLOW, str(tmp_path), str(ROOT)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["backend"] == "jax" and out["status"] == "completed"
    assert out["top1"] > 0.2


@pytest.mark.slow
@pytest.mark.skipif(not FASHION_MNIST.is_dir(),
                    reason="needs Debian's dataset-fashion-mnist (.ci/run installs it)")
def test_short_real_run_on_fashion_mnist(tmp_path):
    cfg = compose("experiment=fashion_mnist", "dataset.limit_train=3000",
                  "dataset.limit_test=1000", "trainer.epochs=2", "trainer.verbose=0",
                  "wandb.mode=disabled")
    record = run_job(cfg, tmp_path)
    assert record["status"] == "completed"
    assert record["data"]["input_shape"] == [28, 28, 1]
    assert record["data"]["test"] == 1000
    assert record["metrics"]["test_top1"] > 0.5  # chance is 0.1


def test_finished_jobs_graphs_are_released():
    """TensorFlow keeps one gradient-registry entry per traced custom gradient
    (the optimizer's all_reduce), each holding a whole train step: a process
    running several jobs grew by a train step per job until they were released.
    Only the entries made since the snapshot go; earlier ones stay."""
    import keras
    if keras.backend.backend() != "tensorflow":
        pytest.skip("a TensorFlow registry")

    from ablation.runtime.process import custom_gradient_names, release_finished_graphs

    def fit_once():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.compile(optimizer="adam", loss="mse")
        model.fit(np.ones((4, 3)), np.ones((4, 2)), epochs=1, verbose=0)

    fit_once()
    earlier = custom_gradient_names()
    assert earlier  # the optimizer step registered some
    fit_once()
    made = custom_gradient_names() - earlier
    assert made
    keras.backend.clear_session()
    assert release_finished_graphs(earlier) == len(made)
    assert custom_gradient_names() == earlier
    fit_once()  # training still works afterwards


FREEZE = r"""
import gc, sys, weakref
sys.path.insert(0, sys.argv[1])
import run_sweep  # noqa: F401
assert not {"tensorflow", "keras", "wandb"} & set(sys.modules)  # import_early comes first
import keras  # noqa: F401  (TensorFlow's half million objects)
from ablation.runtime.process import freeze_imported_objects
from ablation.runs.tracking import import_early
import_early("disabled")
assert "wandb" not in sys.modules  # W&B off: never imported
import_early("offline")
assert "wandb" in sys.modules
freeze_imported_objects()
frozen = gc.get_freeze_count()
assert frozen > 100_000, frozen
freeze_imported_objects()
assert gc.get_freeze_count() == frozen  # once per process, not each job's survivors
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a
alive = weakref.ref(a)
del a, b
gc.collect()
assert alive() is None  # a job's cyclic garbage is still collected
print("ok")
"""


@pytest.mark.slow
def test_imports_are_left_out_of_collections_and_jobs_garbage_is_not():
    """run_sweep freezes what the imports made (each full collection walked it,
    and once more at exit); what a job makes must still be freed."""
    result = subprocess.run([sys.executable, "-c", FREEZE, str(ROOT)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-2000:]


@pytest.mark.slow
def test_a_job_trains_through_the_folded_attention(tmp_path, recwarn):
    """key_dim >= dim (as the keras_io model) routes training through the folded
    attention: a whole job, in bfloat16 with attention dropout, and every
    weight has a gradient (the key bias an exact zero one, not none)."""
    cfg = compose("experiment=smoke", "trainer.epochs=1", "trainer.verbose=0",
                  "wandb.mode=disabled", "model.key_dim=32", "model.attention_dropout=0.1",
                  "trainer.precision=mixed_bfloat16")
    record = run_job(cfg, tmp_path)
    assert record["status"] == "completed"
    assert np.isfinite(record["history"][-1]["train/loss"])
    assert not [w for w in recwarn if "Gradients do not exist" in str(w.message)]


COMPILE_CACHE = r"""
import os, sys
os.environ["KERAS_BACKEND"] = "jax"
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # cache even quick compiles
sys.path[:0] = [sys.argv[1]]
import numpy as np
from omegaconf import OmegaConf
from tests.helpers.config import compose
from ablation.runtime.accelerator import configure
from ablation.model import build_model
from ablation.train.compile import compile_model

cfg = OmegaConf.to_container(compose("experiment=smoke", f"gpu.compilation_cache={sys.argv[2]}"),
                             resolve=True)
configure(cfg["gpu"])
rng = np.random.default_rng(int(sys.argv[3]))  # other data: other normalisation statistics
x = rng.uniform(0, 16, (64, 8, 8, 1)).astype("float32")
y = rng.integers(0, 10, (64, 1))
model = build_model(cfg, 10, (8, 8, 1), normalization_data=x)
compile_model(model, cfg["trainer"], steps_per_epoch=2, num_classes=10)
model.fit(x, y, batch_size=32, epochs=1, verbose=0)
print("ok")
"""


@pytest.mark.slow
def test_jax_compilation_cache_serves_a_job_with_other_data(tmp_path):
    """gpu.compilation_cache keeps XLA's programs on disk, and a job whose
    training split differs (another seed) compiles the same train step: the
    normalisation statistics are weights the program reads, not constants
    compiled into it (on an H100 the train step took 30 s to compile)."""
    pytest.importorskip("jax", reason="the test extra installs jax")
    cache = tmp_path / "xla"

    def train(data_seed: int) -> set:
        result = subprocess.run([sys.executable, "-c", COMPILE_CACHE, str(ROOT), str(cache),
                                 str(data_seed)], capture_output=True, text=True, timeout=600)
        assert result.returncode == 0 and result.stdout.strip().endswith("ok"), \
            result.stderr[-3000:]
        return {p.name for p in cache.glob("jit_train_step-*")}

    first = train(0)
    assert first, "no train step in the cache"
    assert train(1) == first  # found in the cache: nothing new compiled


def test_an_unusable_compilation_cache_folder_is_said_and_skipped(tmp_path, caplog):
    """JAX alone would warn about its first failed read only, then compile every time."""
    from ablation.runtime.accelerator import _use_compilation_cache

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _use_compilation_cache(str(blocker / "cache"))
    assert "cannot be used" in caplog.text and "compiling every time" in caplog.text


HIDDEN_JAX = r"""
import sys
sys.path.insert(0, sys.argv[1])
from ablation.runtime.keras_loader import import_keras
keras = import_keras()
print(keras.backend.backend(), "jax" in sys.modules)
import jax  # importable again afterwards
print(jax.numpy.zeros(2).shape)
"""


BACKEND_CASES = [
    (None, None, "tensorflow"),            # the default: TensorFlow
    ("tensorflow", None, "tensorflow"),    # asked for by name
    ("", None, "tensorflow"),              # an empty KERAS_BACKEND: Keras ignores it
    (None, '{"backend": "jax"}', "jax"),   # keras.json asks for JAX
    (None, "{not json", "tensorflow"),     # not JSON: Keras's default, as Keras reads it
    ("jax", None, "jax"),                  # KERAS_BACKEND asks for JAX
]


def backend_env(tmp_path, backend, keras_json) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["KERAS_HOME"] = str(tmp_path)
    if backend is not None:
        env["KERAS_BACKEND"] = backend
    if keras_json:
        (tmp_path / "keras.json").write_text(keras_json)
    return env


@pytest.mark.parametrize("backend, keras_json, loaded", BACKEND_CASES)
def test_the_backend_is_read_as_keras_reads_it(tmp_path, monkeypatch, backend, keras_json,
                                               loaded):
    """What decides whether JAX is hidden: the backend Keras will load, read
    without importing it (the process test below checks Keras agrees)."""
    from ablation.config.backend import keras_backend_setting

    env = backend_env(tmp_path, backend, keras_json)
    monkeypatch.setenv("KERAS_HOME", env["KERAS_HOME"])
    if backend is None:
        monkeypatch.delenv("KERAS_BACKEND", raising=False)
    else:
        monkeypatch.setenv("KERAS_BACKEND", backend)
    assert keras_backend_setting()[0] == loaded


@pytest.mark.slow
@pytest.mark.parametrize("backend, keras_json, loaded",
                         [case for case in BACKEND_CASES if case[:2] in (
                             (None, None), (None, '{"backend": "jax"}'), (None, "{not json"))])
def test_jax_is_hidden_only_while_tensorflow_loads(tmp_path, backend, keras_json, loaded):
    """TensorFlow's tf.lite imports JAX for a converter no job uses (start-up time and
    memory per process): hidden while Keras loads TensorFlow, never when Keras
    is set to load JAX, and importable afterwards in every case. A process per
    case: the cases where the environment and keras.json each decide."""
    pytest.importorskip("jax")
    if loaded == "tensorflow":
        pytest.importorskip("tensorflow")
    result = subprocess.run([sys.executable, "-c", HIDDEN_JAX, str(ROOT)],
                            env=backend_env(tmp_path, backend, keras_json),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [loaded, str(loaded == "jax"), "(2,)"]
