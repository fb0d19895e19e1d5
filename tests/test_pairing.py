"""What pairing runs by seed rests on: the data a run is fed is drawn from (seed, epoch) alone.

The report pairs each variant with the plain ViT of the same seed (its Δ intervals
are paired over seeds). That is sound only if the validation split, the order of
the training batches, the per-image augmentation and the Mixup/CutMix draws are
the same for every variant of a seed, whatever its switches, and new for each
seed and (the split aside, which is fixed per seed) for each epoch.

These tests build a job's inputs as the job does: the composed config, the
dataset loaded and split by the job's seed, the protocol's training set, the
normalisation, ``training_inputs``, and Keras' end-of-epoch call between epochs.
They read the draws back from what the model is fed. The probe data make each
draw visible on its own: every training image is the same picture, so a batch's
pixels show only the augmentation's draws, and every image has its own class, so
a batch's targets name the images it holds (the order) and, when mixed, the
weights CutMix or Mixup drew.
"""
import itertools

import keras
import numpy as np
import pytest
from tests.helpers.archives import make_cifar_archive
from tests.helpers.config import compose

from ablation.augment.normalization import normalization_statistics
from ablation.data import Dataset, load_dataset_cached
from ablation.train.compile import compiled_model
from ablation.train.inputs import protocol_data, training_inputs

SWITCHES = ("spt", "lsa", "learnable_temperature")
VARIANTS = [dict(zip(SWITCHES, on)) for on in itertools.product((False, True), repeat=3)]
PLAIN = VARIANTS[0]
PAPER = ("experiment=paper_cifar10", "trainer.batch_size=8")
NO_MIXING = "augmentation.mixing.probability=0"
PROBE_IMAGES = 48   # six whole batches of 8 per pass: no batch holds an image twice


def job_config(recipe, seed, variant, *extra):
    return compose(*recipe, f"seed={seed}",
                   *(f"{key}={str(on).lower()}" for key, on in variant.items()), *extra)


def probe_data(side=32, channels=3, count=PROBE_IMAGES):
    """``count`` copies of one picture, image i of class i (see the module's notes)."""
    picture = np.random.default_rng(7).integers(0, 256, (side, side, channels))
    x = np.repeat(picture[None].astype(np.float32), count, axis=0)
    y = np.arange(count)
    return Dataset("probe", x, y, x[:0], y[:0], x[:1], y[:1], [str(i) for i in range(count)])


def epochs_fed(config, data, epochs=2, initial_epoch=0):
    """Every batch of each epoch from ``initial_epoch`` on, as ``fit`` is fed them: the
    training input built once when training starts, moved on by Keras' end-of-epoch call."""
    data = protocol_data(data, config["trainer"]["protocol"])
    statistics = normalization_statistics(config, data.x_train)
    batches = training_inputs(config, data, pad=False, initial_epoch=initial_epoch,
                              statistics=statistics)["x"]
    fed = []
    for _ in range(epochs):
        fed.append([batches[i] for i in range(len(batches))])
        batches.on_epoch_end()
    return fed


def order(epoch):
    """The images an epoch is fed, in order (unmixed targets: one-hot rows of the image's class)."""
    return np.concatenate([targets.argmax(axis=1) for _, targets in epoch])


def augmentation(epoch):
    """The epoch's images: one picture, so only the augmentation's draws tell them apart."""
    return np.concatenate([images for images, _ in epoch])


def mixing(epoch):
    """Each row's two largest target weights: (0, 1) for a row not mixed (or mixed with
    itself), (1 - w, w) for one mixed with weight w. Every image has its own class, so
    this is what CutMix or Mixup drew, whichever images the batch holds."""
    return np.concatenate([np.round(np.sort(targets, axis=1)[:, -2:], 6) for _, targets in epoch])


def draws(seed, variant):
    """Order, augmentation and mixing of the paper recipe's first two epochs for one job.

    The order and the augmentation are read with the mixing off (mixed targets and
    images blend two rows); the mixing from the recipe as it is."""
    unmixed = epochs_fed(job_config(PAPER, seed, variant, NO_MIXING), probe_data())
    mixed = epochs_fed(job_config(PAPER, seed, variant), probe_data())
    return {"order": [order(e) for e in unmixed],
            "augmentation": [augmentation(e) for e in unmixed],
            "mixing": [mixing(e) for e in mixed]}


@pytest.fixture(scope="module")
def cifar_archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("pairing") / "cifar-10-python.tar.gz"
    make_cifar_archive(path, fine=False, n_train=50, n_test=10)
    return path


def split(archive, seed, variant):
    """The validation images the job of (seed, variant) holds out, loaded as the job loads them."""
    config = job_config(PAPER, seed, variant, f"dataset.path={archive}")
    data = load_dataset_cached(config["dataset"], int(config["seed"]))
    return np.asarray(data.x_val), np.asarray(data.y_val)


def test_every_variant_of_a_seed_is_fed_the_same_split_order_augmentation_and_mixing(
        cifar_archive):
    reference = draws(0, PLAIN)
    assert len(reference["order"][0]) == 3 * PROBE_IMAGES   # three passes an epoch
    assert sorted(reference["order"][0]) == sorted(list(range(PROBE_IMAGES)) * 3)
    mixed_rows = np.concatenate(reference["mixing"])[:, 0] > 0
    assert 0 < mixed_rows.mean() < 1                         # some batches mixed, some not
    for variant in VARIANTS[1:]:
        other = draws(0, variant)
        for what in ("order", "augmentation", "mixing"):
            for epoch, (ours, theirs) in enumerate(zip(reference[what], other[what])):
                assert np.array_equal(ours, theirs), f"{what}, epoch {epoch}, {variant}"

    # and the whole feed of a job on real files: split by the seed, every image its own
    x_val, y_val = split(cifar_archive, 0, PLAIN)
    fed = {}
    for variant in (PLAIN, VARIANTS[-1], {**PLAIN, "lsa": True}):
        assert all(np.array_equal(a, b) for a, b in zip(split(cifar_archive, 0, variant),
                                                        (x_val, y_val)))
        config = job_config(PAPER, 0, variant, f"dataset.path={cifar_archive}")
        data = load_dataset_cached(config["dataset"], int(config["seed"]))
        fed[str(variant)] = epochs_fed(config, data)
    first, *others = fed.values()
    for other in others:
        for ours, theirs in zip(first, other):
            for (x_a, y_a), (x_b, y_b) in zip(ours, theirs, strict=True):
                assert np.array_equal(x_a, x_b) and np.array_equal(y_a, y_b)


def test_another_seed_draws_another_split_order_augmentation_and_mixing(cifar_archive):
    zero, one = draws(0, PLAIN), draws(1, PLAIN)
    for what in ("order", "augmentation", "mixing"):
        for epoch in (0, 1):
            assert not np.array_equal(zero[what][epoch], one[what][epoch]), (what, epoch)
    (x_zero, _), (x_one, _) = split(cifar_archive, 0, PLAIN), split(cifar_archive, 1, PLAIN)
    assert len(x_zero) == len(x_one) == 5 and not np.array_equal(x_zero, x_one)
    assert np.array_equal(split(cifar_archive, 0, PLAIN)[0], x_zero)  # and seed 0's again


def test_each_epoch_draws_a_new_order_augmentation_and_mixing_and_a_resume_the_same():
    run = draws(0, PLAIN)
    for what in ("order", "augmentation", "mixing"):
        assert not np.array_equal(run[what][0], run[what][1]), what
    # a job resumed at epoch 1 is fed what an unbroken one is fed in its epoch 1
    for extra in ((NO_MIXING,), ()):
        config = job_config(PAPER, 0, PLAIN, *extra)
        (resumed,) = epochs_fed(config, probe_data(), epochs=1, initial_epoch=1)
        unbroken = epochs_fed(config, probe_data())[1]
        for (x_a, y_a), (x_b, y_b) in zip(resumed, unbroken, strict=True):
            assert np.array_equal(x_a, x_b) and np.array_equal(y_a, y_b)


# --- what Keras' own loop is fed, for a recipe without augmentation or mixing ----------

SMOKE = ("experiment=smoke", "trainer.batch_size=32")


def fed_to_fit(seed, variant, epochs=2):
    """The classes ``model.fit`` trains on, in order, in each of the first ``epochs``
    epochs of the smoke recipe's job: the job's own compiled model (seeded as the job
    seeds it) and training input, through Keras' loop. Only the loss is swapped, for one
    that keeps its targets (run eagerly, so it can) and learns nothing."""
    config = job_config(SMOKE, seed, variant)
    data = probe_data(side=8, channels=1, count=64)  # two batches of 32
    statistics = normalization_statistics(config, data.x_train)
    model = compiled_model(config, data, statistics)
    seen = []

    def keep_targets(y_true, y_pred):
        seen.append(np.asarray(y_true))
        return keras.ops.sum(y_pred) * 0.0

    model.compile(optimizer="sgd", loss=keep_targets, run_eagerly=True)
    model.fit(**training_inputs(config, data, False, 0, statistics), epochs=epochs, verbose=0)
    classes = [t.argmax(axis=-1) if t.ndim == 2 and t.shape[-1] > 1 else t.reshape(-1)
               for t in seen]
    steps = len(classes) // epochs
    return [np.concatenate(classes[e * steps:(e + 1) * steps]) for e in range(epochs)]


def test_fit_is_fed_a_new_order_each_epoch_by_the_seed_alone():
    """Keras' shuffle of arrays under a fixed seed deals the same order every epoch on
    the TensorFlow backend: the order has to come from the (seed, epoch) pipeline."""
    plain = fed_to_fit(0, PLAIN)
    assert [sorted(epoch) for epoch in plain] == [list(range(64))] * 2
    assert not np.array_equal(plain[0], plain[1])
    assert all(np.array_equal(a, b) for a, b in zip(fed_to_fit(0, VARIANTS[-1]), plain))
    assert not np.array_equal(fed_to_fit(1, PLAIN)[0], plain[0])


def test_the_in_model_augmentation_draws_by_seed_and_step_not_by_switches():
    """The keras.io recipe augments inside the model (training only): its draws come
    from the seed, advance with each step, and are the same for every variant."""
    images = np.random.default_rng(3).integers(0, 256, (16, 8, 8, 1)).astype(np.float32)

    def two_steps(seed, variant):
        config = job_config(("experiment=smoke", "augmentation=keras_io"), seed, variant)
        data = probe_data(side=8, channels=1, count=16)
        model = compiled_model(config, data, normalization_statistics(config, images))
        layer = model.get_layer("augmentation")
        return [keras.ops.convert_to_numpy(layer(images, training=True)) for _ in range(2)]

    plain = two_steps(0, PLAIN)
    assert not np.allclose(plain[0], plain[1])                       # a new draw each step
    assert all(np.array_equal(a, b) for a, b in zip(two_steps(0, VARIANTS[-1]), plain))
    assert not np.allclose(two_steps(1, PLAIN)[0], plain[0])         # another for another seed
