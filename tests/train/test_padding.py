"""Padding a short batch with weight-0 rows changes no figure: the gradient, the
updated weights, an epoch's recorded loss/top-1/top-5, ``evaluate``'s, the
locality probe's, with and without Mixup/CutMix; and on JAX it leaves one
compiled program for training and one for evaluation (a ``jax_backend`` test: it runs
in the suite's JAX pass, tests/test_jax_backend.py).

Every comparison is between the same batches padded and unpadded: 100 images
in batches of 32, so the last batch has 4 real rows and 28 of padding.
"""
import logging

import keras
import numpy as np
import pytest
from omegaconf import OmegaConf

from ablation.data.batches import Mixer, TrainingBatches, padded, padded_chunks
from ablation.model import build_model
from ablation.train.epoch_metrics import EpochMetrics
from ablation.train.compile import compile_model
from tests.helpers.config import compose

N, BATCH, CLASSES, SHAPE = 100, 32, 10, (8, 8, 1)
TRAIN_KEYS = ("train/loss", "train/top1", "train/top5")
VAL_KEYS = ("val/loss", "val/top1", "val/top5")


def config(*overrides):
    cfg = compose("experiment=smoke", "model.head_dropout=0", f"trainer.batch_size={BATCH}",
                  "trainer.epochs=1", *overrides)
    return OmegaConf.to_container(cfg, resolve=True)


def data(seed=0, n=N):
    rng = np.random.default_rng(seed)
    return (rng.uniform(0, 16, (n, *SHAPE)).astype("float32"),
            rng.integers(0, CLASSES, n).astype("int64"))


def model(cfg, x, soft=False, vit=False):
    """A tiny model (the smoke ViT with ``vit``, dropout 0) compiled as a job
    compiles it, from fixed seeds."""
    keras.utils.set_random_seed(0)
    if vit:
        built = build_model(cfg, CLASSES, SHAPE, normalization_data=x)
    else:  # padding concerns the loss, metrics and batches, not the layers: fast to trace
        built = keras.Sequential([keras.Input(SHAPE), keras.layers.Flatten(),
                                  keras.layers.Dense(16, activation="gelu"),
                                  keras.layers.Dense(CLASSES)])
    steps = -(-len(x) // BATCH)
    return compile_model(built, cfg["trainer"], steps, CLASSES, soft_targets=soft)


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=rtol, atol=atol)


def weights(m):
    return [np.array(w) for w in m.get_weights()]


def test_padded_rows_are_weight_zero_copies_and_whole_batches():
    x, y = data()
    px, py, w = padded(x, y, BATCH)
    assert len(px) == len(py) == len(w) == 128
    assert w.dtype == np.float32 and w.sum() == N and not w[N:].any()
    assert np.array_equal(px[:N], x) and np.array_equal(px[N:], x[:28])
    assert [len(part) for part in padded(x[:0], y[:0], BATCH)] == [0, 0, 0]
    chunks = list(padded_chunks(x[:70], BATCH))
    assert [n for n, _ in chunks] == [32, 32, 6]
    assert {c.shape[0] for _, c in chunks} == {32}
    assert [c.shape[0] for _, c in padded_chunks(x[:20], BATCH)] == [20]  # fewer: as they are


@pytest.mark.slow   # slower than a fast-lane test
def test_one_step_gradient_and_updated_weights_equal_the_unpadded_batch():
    """The last batch (4 real rows) padded to 32: SGD(1) applies exactly the
    gradient, so the weight change is the gradient; AdamW is the job's optimizer."""
    cfg = config()
    x, y = data()
    real_x, real_y = x[96:], y[96:]
    pad_x, pad_y, pad_w = padded(real_x, real_y, BATCH)

    def step(optimizer, reduction=None, **batch):
        m = model(cfg, x)
        if optimizer is not None:
            loss = m.loss if reduction is None else keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction=reduction)
            m.compile(optimizer=optimizer, loss=loss)
        before = weights(m)
        m.train_on_batch(**batch)
        return [a - b for a, b in zip(before, weights(m))]

    plain = step(keras.optimizers.SGD(1.0), x=real_x, y=real_y)
    pad = step(keras.optimizers.SGD(1.0), x=pad_x, y=pad_y, sample_weight=pad_w)
    assert sum(float(np.abs(g).sum()) for g in plain) > 0
    for a, b in zip(plain, pad):
        close(a, b)
    # Keras' default reduction divides by all 32 rows: the gradient would shrink 8-fold
    default = step(keras.optimizers.SGD(1.0), "sum_over_batch_size",
                   x=pad_x, y=pad_y, sample_weight=pad_w)
    close(sum(float(np.abs(g).sum()) for g in default) * 8,
          sum(float(np.abs(g).sum()) for g in plain), rtol=1e-3)
    # AdamW's first step is lr * g / (|g| + eps): float32 noise in a gradient of
    # eps's size moves it by a fraction of lr (here 3e-3), hence the tolerance
    for a, b in zip(step(None, x=real_x, y=real_y),
                    step(None, x=pad_x, y=pad_y, sample_weight=pad_w)):
        close(a, b, atol=3e-5)


def fit_epoch(cfg, x, y, pad, mixer=None, soft=False, evaluate=True):
    """One epoch through TrainingBatches (the same batches either way), validated
    on 50 images; returns the recorded row, evaluate()'s dict and the model."""
    vx, vy = data(seed=1, n=50)
    if soft:
        vy = keras.utils.to_categorical(vy, CLASSES).astype("float32")
    m = model(cfg, x, soft=soft)
    epochs = EpochMetrics()
    batches = TrainingBatches(x, y, CLASSES, BATCH, soft=soft, mixer=mixer, seed=3, pad=pad)
    validation = padded(vx, vy, BATCH) if pad else (vx, vy)
    m.fit(batches, validation_data=validation, validation_batch_size=BATCH, epochs=1,
          callbacks=[epochs], verbose=0)
    test = None
    if evaluate:
        ex, ey, *w = validation
        test = m.evaluate(ex, ey, sample_weight=w[0] if w else None, batch_size=BATCH,
                          verbose=0, return_dict=True)
    return epochs.history[0], test, m


@pytest.mark.slow   # slower than a fast-lane test
def test_an_epochs_recorded_figures_and_evaluate_equal_the_unpadded_ones():
    cfg = config()
    x, y = data()
    plain, plain_test, _ = fit_epoch(cfg, x, y, pad=False)
    pad, pad_test, pad_model = fit_epoch(cfg, x, y, pad=True)
    for key in TRAIN_KEYS + VAL_KEYS:
        close(plain[key], pad[key], rtol=1e-4)
    for key in ("loss", "top1", "top5"):
        close(plain_test[key], pad_test[key])
    assert plain["lr"] == pad["lr"]  # the same number of steps on the schedule
    # the check can fail: counted, the 78 padding rows would move the figures
    vx, vy = data(seed=1, n=50)
    counted = pad_model.evaluate(*padded(vx, vy, BATCH)[:2], batch_size=BATCH, verbose=0,
                                 return_dict=True)
    assert abs(counted["loss"] - pad_test["loss"]) > 1e-3
    # Keras' own tracker weighs each batch by its row count, padding included
    tracker = pad_model._loss_tracker  # what "loss" would be without MeanLoss
    assert abs(float(tracker.result()) - pad_test["loss"]) > 1e-4


@pytest.mark.parametrize("kind", ["mixup", "cutmix"])
def test_mixing_never_draws_a_padding_row_and_counts_real_images(kind):
    x, y = data()
    mixer = Mixer(1.0, mixup_alpha=1.0 if kind == "mixup" else 0.0,
                  cutmix_alpha=1.0 if kind == "cutmix" else 0.0)
    plain = TrainingBatches(x, y, CLASSES, BATCH, mixer=mixer, seed=3, passes=2)
    pad = TrainingBatches(x, y, CLASSES, BATCH, mixer=mixer, seed=3, passes=2, pad=True)
    assert len(plain) == len(pad) == 7  # ceil(2 * 100 / 32): steps per epoch unchanged
    total = 0.0
    for i in range(len(pad)):
        (ix, iy), (px, py, w) = plain[i], pad[i]
        real = len(ix)
        assert px.shape[0] == py.shape[0] == w.shape[0] == BATCH
        # the real rows are mixed exactly as unpadded: no padding row was drawn as a partner
        assert np.array_equal(px[:real], ix) and np.array_equal(py[:real], iy)
        assert not np.array_equal(ix, x[plain.order[i * BATCH:i * BATCH + real]])  # mixed
        assert np.all(w[:real] == 1) and np.all(w[real:] == 0)
        assert np.array_equal(px[real:], px[:real][np.arange(BATCH - real) % real])
        total += float(w.sum())
    assert total == 2 * N


@pytest.mark.slow   # slower than a fast-lane test
def test_an_epoch_with_mixing_and_label_smoothing_records_the_unpadded_figures():
    """Mixup or CutMix on every batch (one drawn per batch), soft targets smoothed."""
    cfg = config("trainer.label_smoothing=0.1")
    x, y = data()
    plain, _, _ = fit_epoch(cfg, x, y, pad=False, mixer=Mixer(1.0), soft=True, evaluate=False)
    pad, _, _ = fit_epoch(cfg, x, y, pad=True, mixer=Mixer(1.0), soft=True, evaluate=False)
    for key in TRAIN_KEYS + VAL_KEYS:
        close(plain[key], pad[key], rtol=1e-4)


def test_the_locality_probe_measures_the_same_with_a_padded_last_batch():
    from ablation.train.locality_probe import LocalityProbe

    cfg = config()
    x, _ = data()
    m = model(cfg, x, vit=True)
    whole = LocalityProbe(x[:50], np.arange(50), batch_size=50, attention_maps=2).measure(m)
    split = LocalityProbe(x[:50], np.arange(50), batch_size=32, attention_maps=2).measure(m)
    assert whole["probe_images"] == split["probe_images"] == 50
    for a, b in zip(whole["layers"], split["layers"]):
        for q in ("entropy", "normalized_entropy", "mean_distance_px", "self_attention"):
            close(a[q], b[q])


class Compiles(logging.Handler):
    """Collects the names of the programs JAX compiles (``jax_log_compiles``)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.compiled = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Compiling "):
            self.compiled.append(message.split()[1])


@pytest.mark.jax_backend
@pytest.mark.skipif(keras.backend.backend() != "jax",
                    reason="counts JAX's programs: runs in the JAX pass (tests/test_jax_backend.py)")
def test_jax_compiles_one_train_and_one_eval_program():
    """An epoch, validated, then a test set of another size: one program
    each when padded; unpadded, each short batch's shape its own. (The probe's
    batches all have one shape: test_padded_rows_are_weight_zero_copies_...)"""
    import jax

    compiles, logger = Compiles(), logging.getLogger("jax")
    saved_level = logger.level

    def programs(pad):
        compiles.compiled.clear()
        cfg = config()
        x, y = data()
        vx, vy = data(seed=1, n=50)
        m = model(cfg, x)
        validation = padded(vx, vy, BATCH) if pad else (vx, vy)
        m.fit(TrainingBatches(x, y, 10, BATCH, seed=3, pad=pad), validation_data=validation,
              validation_batch_size=BATCH, epochs=1, verbose=0)
        tx, ty = data(seed=2, n=70)
        test = padded(tx, ty, BATCH) if pad else (tx, ty, None)
        m.evaluate(test[0], test[1], sample_weight=test[2], batch_size=BATCH, verbose=0)
        return {name: compiles.compiled.count(f"jit({name})")
                for name in ("train_step", "test_step")}

    jax.config.update("jax_log_compiles", True)
    logger.addHandler(compiles)
    logger.setLevel(logging.DEBUG)
    try:
        counts = {"padded": programs(True), "unpadded": programs(False)}
    finally:
        jax.config.update("jax_log_compiles", False)
        logger.removeHandler(compiles)
        logger.setLevel(saved_level)
    assert counts["padded"] == {"train_step": 1, "test_step": 1}
    # train: 32 and 4 rows; eval: 32, 18 (validation) and 6 (test)
    assert counts["unpadded"] == {"train_step": 2, "test_step": 3}


def test_a_checkpoints_model_pads_only_if_it_weighs_samples(tmp_path):
    """A saved model loads with MeanLoss and weighted metrics (registered); one
    compiled with plain metrics, as checkpoints of older versions are, is not padded."""
    import ablation.train.checkpoint  # noqa: F401  (what a resumed job has imported)
    from ablation.train.compile import pad_batches

    cfg = config()
    x, y = data()
    m = model(cfg, x)
    m.fit(x[:BATCH], y[:BATCH], batch_size=BATCH, epochs=1, verbose=0)
    m.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    trainer = {**cfg["trainer"], "pad_batches": True}
    assert pad_batches(trainer, loaded)
    assert not pad_batches({**trainer, "pad_batches": False}, loaded)
    # auto: where XLA compiles the model (JAX; TensorFlow on a GPU), one program per shape
    assert pad_batches({**trainer, "pad_batches": "auto"}, loaded) == bool(loaded.jit_compile)
    vx, vy, w = padded(x[:50], y[:50], BATCH)
    close(loaded.evaluate(vx, vy, sample_weight=w, verbose=0, return_dict=True)["loss"],
          m.evaluate(x[:50], y[:50], verbose=0, return_dict=True)["loss"])
    m.compile(optimizer="adamw", metrics=["accuracy"],
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert not pad_batches(trainer, m)
