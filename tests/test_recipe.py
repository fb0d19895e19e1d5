"""The paper's recipe, piece by piece: each config key does what it says."""

import keras
import numpy as np
import pytest
from tests.helpers.config import compose

from ablation.data.batches import Mixer, TrainingBatches, one_hot, training_batches
from ablation.model.layers import TransformerBlock
from ablation.model.regularization import DropPath
from ablation.train.compile import compile_model, learning_rate_schedule
from ablation.train.inputs import Feed


def constant_batch(n=8, side=8):
    """Image i is the constant i, labelled class i: every pixel says where it came from."""
    x = np.stack([np.full((side, side, 3), float(i)) for i in range(n)]).astype(np.float32)
    return x, one_hot(np.arange(n), n)


def test_cutmix_labels_mix_in_proportion_to_the_pasted_area():
    x, y = constant_batch()
    mixed_any = False
    for seed in range(4):
        images, targets = Mixer(1.0, seed=seed).apply("cutmix", x, y)
        for i in range(len(x)):
            values, counts = np.unique(images[i], return_counts=True)
            share = dict(zip(values.astype(int), counts / images[i].size))
            assert targets[i].sum() == pytest.approx(1.0)
            for cls, weight in enumerate(targets[i]):
                assert weight == pytest.approx(share.get(cls, 0.0), abs=1e-6)
            mixed_any |= len(share) > 1
    assert mixed_any


def test_mixup_labels_mix_in_proportion_to_lambda():
    x, y = constant_batch()
    images, targets = Mixer(1.0, seed=3).apply("mixup", x, y)
    for i in range(len(x)):
        own = targets[i, i]
        partner = int(np.argmax(np.where(np.arange(len(x)) == i, -1, targets[i]))) \
            if own < 1 else i
        # pixel = lambda * i + (1 - lambda) * partner, label = lambda on i, 1 - lambda on partner
        assert images[i, 0, 0, 0] == pytest.approx(own * i + (1 - own) * partner, abs=1e-4)
        assert targets[i].sum() == pytest.approx(1.0)
    assert (targets.max(axis=1) < 1).any()


def test_mixing_probability_and_half_each():
    mixer = Mixer(0.5, seed=0)
    kinds = [mixer.choose() for _ in range(4000)]
    assert kinds.count(None) / 4000 == pytest.approx(0.5, abs=0.03)
    assert kinds.count("cutmix") / 4000 == pytest.approx(0.25, abs=0.03)


def test_drop_path_drops_whole_branches_at_the_rate_in_training_only():
    layer = DropPath(0.25, seed=0)
    x = np.ones((4000, 5, 3), dtype=np.float32)
    out = keras.ops.convert_to_numpy(layer(x, training=True))
    per_sample = out.reshape(len(x), -1)
    dropped = (per_sample == 0).all(axis=1)
    kept = np.isclose(per_sample, 1 / 0.75).all(axis=1)
    assert (dropped | kept).all()                        # whole branch, never part of one
    assert dropped.mean() == pytest.approx(0.25, abs=0.03)
    assert (keras.ops.convert_to_numpy(layer(x, training=False)) == x).all()
    assert DropPath.from_config(layer.get_config()).rate == 0.25


def test_transformer_block_drops_both_branches():
    block = TransformerBlock({"num_heads": 2, "key_dim": 4}, {"hidden_units": [8],
                             "output_units": 8}, drop_path=0.95)
    x = np.random.default_rng(0).normal(size=(400, 5, 8)).astype(np.float32)
    train = keras.ops.convert_to_numpy(block(x, training=True))
    unchanged = np.isclose(train, x).all(axis=(1, 2)).mean()
    assert unchanged == pytest.approx(0.95 ** 2, abs=0.05)   # both branches dropped
    assert not np.isclose(keras.ops.convert_to_numpy(block(x, training=False)), x).all()
    assert block.get_config()["drop_path"] == 0.95


def test_label_smoothing_changes_the_loss_as_defined():
    k, eps = 4, 0.1
    model = keras.Sequential([keras.Input((k,)), keras.layers.Identity()])
    trainer = {**compose("experiment=smoke").trainer, "epochs": 1, "warmup_fraction": 0.0,
               "learning_rate": 1e-3, "weight_decay": 0.0, "label_smoothing": eps}
    compile_model(model, trainer, 1, k, soft_targets=True)
    logits = np.array([[2.0, 0.5, -1.0, 0.0]], dtype=np.float32)
    target = one_hot(np.array([0]), k)
    log_p = logits[0] - np.log(np.exp(logits[0]).sum())
    smoothed = (1 - eps) * target[0] + eps / k              # the definition
    loss = float(keras.ops.convert_to_numpy(model.loss(target, logits)))
    assert loss == pytest.approx(-(smoothed * log_p).sum(), rel=1e-5)
    assert -(smoothed * log_p).sum() != pytest.approx(-log_p[0], rel=1e-3)


def test_passes_per_epoch_triple_the_steps_and_the_order_is_reproducible():
    x = np.zeros((100, 4, 4, 1), np.float32)
    y = np.arange(100) % 10
    feed = dict(soft=False, mixing=None, augment=None, workers=1, seed=0)
    one = training_batches(x, y, 10, 10, passes=1, **feed)
    three = training_batches(x, y, 10, 10, passes=3, **feed)
    assert (len(one), len(three)) == (10, 30)
    assert sorted(three.order.tolist()) == sorted(list(range(100)) * 3)
    again = TrainingBatches(x, y, 10, 10, passes=3, seed=0)
    assert (again.order == three.order).all()
    three.on_epoch_end()
    assert (three.order != again.order).any()             # a new order each epoch
    assert (TrainingBatches(x, y, 10, 10, passes=3, seed=0, initial_epoch=1).order
            == three.order).all()                          # and the same one after a resume


def test_schedule_warms_up_for_warmup_epochs_and_ends_at_the_floor():
    trainer = {**compose("experiment=smoke").trainer, "epochs": 100, "learning_rate": 1e-3,
               "warmup_epochs": 10, "warmup_fraction": 0.1, "min_learning_rate": 1e-6}
    steps = 7
    schedule = learning_rate_schedule(trainer, steps)
    lr = lambda step: float(keras.ops.convert_to_numpy(schedule(step)))
    assert lr(10 * steps) == pytest.approx(1e-3)                  # peak after 10 epochs
    assert lr(0) == pytest.approx(1e-6)                           # from the floor, as official
    assert lr(5 * steps) == pytest.approx(1e-6 + (1e-3 - 1e-6) / 2)  # linear warm-up
    assert lr(100 * steps) == pytest.approx(1e-6, rel=1e-3)       # floor at the end
    assert lr(55 * steps) == pytest.approx(1e-6 + (1e-3 - 1e-6) / 2, rel=1e-3)  # cosine mid


def test_presets_compose():
    for name, classes_path, size, patch in (("paper_cifar100", "cifar100", 32, 4),
                                            ("paper_cifar10", "cifar10", 32, 4),
                                            ("paper_tiny_imagenet", "image_folder", 64, 8)):
        cfg = compose(f"experiment={name}")
        assert cfg.dataset.name == classes_path and cfg.model.name == "paper"
        assert (cfg.model.image_size, cfg.model.patch_size) == (size, patch)
        assert cfg.trainer.passes_per_epoch == 3 and cfg.trainer.protocol == "official"
        assert cfg.trainer.label_smoothing == 0.1 and cfg.model.drop_path == 0.1
        assert cfg.augmentation.policy == "autoaugment"
        assert not cfg.model.qkv_bias and cfg.model.temperature_form == "multiply"
    assert compose("experiment=paper_tiny_imagenet").dataset.image_size == 64


@pytest.mark.slow
def test_official_protocol_trains_on_everything_and_records_the_best_test_epoch(tmp_path):
    from ablation.job import run_job

    cfg = compose("experiment=smoke", "trainer.epochs=2", "trainer.verbose=0",
                  "trainer.protocol=official", "trainer.label_smoothing=0.1",
                  "trainer.passes_per_epoch=2", "augmentation.mixing.probability=0.5",
                  "model.drop_path=0.1", "wandb.mode=disabled", "trainer.checkpoint=false",
                  "dataset.limit_train=300", "dataset.limit_test=100", "model.depth=1",
                  "trainer.save_model=false")
    record = run_job(cfg, tmp_path)
    assert record["status"] == "completed" and record["protocol"] == "official"
    assert record["model_file"] is None and not (tmp_path / "model.keras").exists()
    assert record["data"]["train"] == 300 and record["data"]["val"] == 0
    metrics = record["metrics"]
    tops = [row["test/top1"] for row in record["history"]]
    assert len(tops) == 2 and "val/top1" not in record["history"][0]
    assert metrics["best_test_top1"] == max(tops)
    assert metrics["best_test_epoch"] == 1 + tops.index(max(tops))
    assert metrics["test_top1"] == pytest.approx(tops[-1], abs=1e-6)  # final = last epoch's
    assert 0 < record["trainable_params"] < record["params"]          # minus normalisation
    assert record["params"] - record["trainable_params"] == 2 * 1 + 1  # mean, var, count


def test_random_layers_draw_from_their_own_seeds_and_the_crop_is_official():
    from ablation.augment import build_augmentation

    x = np.zeros((2, 32, 32, 3), np.float32)
    aug = build_augmentation(72, x, implementation="keras_layers", rotation=0.02, zoom=0.2,
                             crop_padding=4, policy="randaugment", random_erasing=0.25,
                             input_size=32, seed=7)
    seeds = [layer.seed for layer in aug.layers if getattr(layer, "seed", None) is not None]
    assert len(seeds) == 6 and len(set(seeds)) == len(seeds)   # no two layers share a stream
    crop = aug.get_layer("random_crop")  # on the 32 px input, not the 72 px model size:
    assert crop.height_factor == crop.width_factor == pytest.approx(4.5 / 32)  # 9 offsets
    # the flip no longer decides the rotation's sign (one shared seed made them equal)
    flips, signs = [], []
    for _ in range(40):
        flip = aug.get_layer("flip").get_random_transformation(x, training=True)["flips"]
        angle = aug.get_layer("rotation").get_random_transformation(x, training=True)
        flips.append(bool(np.asarray(flip).reshape(-1)[0]))
        signs.append(float(np.asarray(angle["angle"]).reshape(-1)[0]) < 0)
    assert flips != signs


def test_paper_augmentation_runs_in_training_only():
    from ablation.augment import build_augmentation

    x = np.random.default_rng(0).integers(0, 256, (4, 16, 16, 3)).astype(np.float32)
    recipe = dict(crop_padding=4, policy="randaugment", random_erasing=0.25,
                  mixing={"probability": 0.5})  # mixing: the pipeline's
    chained = build_augmentation(16, x, implementation="keras_layers", seed=0, **recipe)
    assert [layer.name for layer in chained.layers] == [
        "random_crop", "randaugment", "normalization", "resize", "flip", "random_erasing"]
    aug = build_augmentation(16, x, seed=0, **recipe)  # the default: one affine resample
    assert [layer.name for layer in aug.layers] == [
        "random_crop", "randaugment", "normalization", "resample", "random_erasing"]
    normalised = keras.ops.convert_to_numpy(aug.get_layer("normalization")(x))
    assert np.allclose(keras.ops.convert_to_numpy(aug(x, training=False)), normalised)
    assert not np.allclose(keras.ops.convert_to_numpy(aug(x, training=True)), normalised)
    rand = build_augmentation(16, x, policy="randaugment", seed=0)   # alone
    assert rand.layers[0].name == "randaugment"
    assert not np.allclose(keras.ops.convert_to_numpy(rand(x, training=True)),
                           keras.ops.convert_to_numpy(rand(x, training=False)))
    with pytest.raises(ValueError, match="augmentation.policy"):
        build_augmentation(16, x, policy="autoaugmnt")
    with pytest.raises(ValueError, match="implementation=official"):  # the input pipeline's
        build_augmentation(16, x, policy="autoaugment")


def test_mixed_batches_depend_only_on_seed_epoch_and_index():
    x = np.random.default_rng(0).integers(0, 256, (64, 8, 8, 3)).astype(np.float32)
    y = np.arange(64) % 10
    make = lambda: TrainingBatches(x, y, 10, 16, mixer=Mixer(1.0, seed=0), seed=5)
    a, b = make(), make()
    for i in (2, 0, 3, 1):  # any order, as parallel workers ask
        (xa, ya), (xb, yb) = a[i], b[i]
        assert np.array_equal(xa, xb) and np.array_equal(ya, yb)
    assert not np.array_equal(a[0][0], x[a.order[:16]])  # and mixed they are


def test_tiny_imagenet_preset_has_the_official_trainable_parameter_counts():
    from ablation.model import build_model
    from ablation.train.fit import trainable_count

    # official Tiny-ImageNet models (the paper's "2.8M / 2.9M"): ViT and SL-ViT
    for switches, expected in (("spt=false", "lsa=false"), 2_756_744), \
                              (("spt=true", "lsa=true"), 2_906_228):
        cfg = compose("experiment=paper_tiny_imagenet", *switches)
        model = build_model(cfg, 200, (64, 64, 3))
        assert trainable_count(model) == expected


@pytest.mark.parametrize("initial, target, warmup, decay, alpha", [
    (0.0, 1e-3, 10, 90, 0.0),             # keras_io: from 0, down to 0
    (1e-6, 1e-3, 70, 630, 1e-6 / 1e-3),   # the official recipe: from and down to the floor
    (0.0, 3e-3, 1, 1, 0.0),               # the shortest schedule
])
def test_branch_free_schedule_is_keras_cosine_decay(initial, target, warmup, decay, alpha):
    """WarmupCosineDecay gives Keras's CosineDecay values exactly, step by step,
    past the end too, and saves and loads as itself."""
    from ablation.train.schedules import WarmupCosineDecay

    keras_schedule = keras.optimizers.schedules.CosineDecay(
        initial, decay_steps=decay, warmup_target=target, warmup_steps=warmup, alpha=alpha)
    ours = WarmupCosineDecay(initial, decay_steps=decay, warmup_target=target,
                             warmup_steps=warmup, alpha=alpha)
    values = lambda s: np.array([float(keras.ops.convert_to_numpy(s(np.int64(step))))
                                 for step in range(warmup + decay + 3)])
    if keras.backend.backend() == "tensorflow":
        np.testing.assert_array_equal(values(ours), values(keras_schedule))
    else:  # JAX op by op rounds a few values an ulp or two apart (equal under jit)
        np.testing.assert_allclose(values(ours), values(keras_schedule), rtol=1e-6)
    loaded = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(ours))
    assert type(loaded) is WarmupCosineDecay and loaded.get_config() == ours.get_config()
    with pytest.raises(ValueError, match="warmup_steps > 0"):
        WarmupCosineDecay(0.0, decay_steps=5, warmup_target=1e-3, warmup_steps=0)
    with pytest.raises(ValueError, match="needs a warmup_target"):
        WarmupCosineDecay(0.0, decay_steps=5, warmup_target=None, warmup_steps=3)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="inspects a TensorFlow graph")
def test_the_schedule_traces_no_conditional():
    """Keras's warm-up traced a conditional (two sub-graphs) at each evaluation,
    ours traces a select."""
    import tensorflow as tf

    trainer = {"epochs": 10, "learning_rate": 1e-3, "warmup_fraction": 0.1,
               "warmup_epochs": None, "min_learning_rate": 0.0}
    schedule = learning_rate_schedule(trainer, steps_per_epoch=5)
    keras_schedule = keras.optimizers.schedules.CosineDecay(
        0.0, decay_steps=45, warmup_target=1e-3, warmup_steps=5)

    def op_types(s):
        graph = tf.function(s).get_concrete_function(tf.TensorSpec((), tf.int64)).graph
        return {op.type for op in graph.get_operations()}

    assert {"If", "StatelessIf"} & op_types(keras_schedule)  # what was slow: still so in Keras
    assert not {"If", "StatelessIf"} & op_types(schedule)
    assert "SelectV2" in op_types(schedule)


class CountingSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A decaying rate that counts its evaluations."""

    def __init__(self):
        self.calls = 0

    def __call__(self, step):
        self.calls += 1
        return 1e-2 / (1.0 + keras.ops.cast(step, "float32"))

    def get_config(self):
        return {}


@pytest.mark.parametrize("form", ["keras", "torch"])
def test_the_optimizer_evaluates_the_schedule_once_per_step_with_keras_numbers(form):
    """Keras's AdamW evaluates the schedule again for each variable's weight
    decay; ours once per step, with the same variables after every step, and
    the rate still reads and sets as in Keras outside a step."""
    from ablation.train.optimizer import build_optimizer

    rng = np.random.default_rng(0)
    starts = [rng.normal(size=shape).astype("float32") for shape in [(3, 4), (4,), (2, 2, 2)]]
    grads = [[rng.normal(size=v.shape).astype("float32") for v in starts] for _ in range(6)]
    trainer = {"weight_decay": 0.05, "optimizer_epsilon": 1e-7, "epsilon_form": form}

    def run(optimizer, schedule):
        variables = [keras.Variable(v) for v in starts]
        for step_grads in grads:
            optimizer.apply_gradients(zip([keras.ops.convert_to_tensor(g) for g in step_grads],
                                          variables))
        return [np.asarray(v) for v in variables], schedule.calls

    if keras.backend.backend() == "torch":  # Keras's torch optimizers decay on their own path
        pytest.skip("on PyTorch the Keras form is Keras's own AdamW (one update for all)")
    ours, our_calls = run(build_optimizer(trainer, schedule := CountingSchedule()), schedule)
    assert our_calls == len(grads)
    if form == "keras":
        reference = keras.optimizers.AdamW(learning_rate=(counted := CountingSchedule()),
                                           weight_decay=0.05, epsilon=1e-7)
        theirs, their_calls = run(reference, counted)
        assert their_calls == len(grads) * (1 + len(starts))  # what the mixin saves
        for mine, keras_value in zip(ours, theirs):
            np.testing.assert_array_equal(mine, keras_value)
    optimizer = build_optimizer(trainer, schedule := CountingSchedule())
    assert float(optimizer.learning_rate) == pytest.approx(1e-2) and schedule.calls == 1
    fixed = build_optimizer(trainer, 1e-3)
    fixed.learning_rate = 5e-4
    assert float(fixed.learning_rate) == pytest.approx(5e-4)


def test_mixup_draws_one_weight_and_cutmix_one_clipped_box_per_batch():
    x, y = constant_batch(16)
    for seed in range(6):
        _, targets = Mixer(1.0, seed=seed).apply("mixup", x, y)
        own = targets[np.arange(16), np.arange(16)]
        moved = own < 1  # images paired with another: all with the same lambda
        assert np.allclose(own[moved], own[moved][0])
        images, targets = Mixer(1.0, seed=seed).apply("cutmix", x, y)
        pasted = images != x                          # one box, the same for every image
        box = pasted.any(axis=0)[..., 0]
        rows, cols = np.flatnonzero(box.any(axis=1)), np.flatnonzero(box.any(axis=0))
        if len(rows):
            assert box[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1].all()


def test_official_pipeline_augments_each_image_before_the_mixing():
    from ablation.augment import build_augmentation

    cfg = compose("experiment=paper_cifar10", "trainer.batch_size=16")
    augmentation = dict(cfg.augmentation)
    assert augmentation["implementation"] == "official"
    x = np.random.default_rng(0).integers(0, 256, (64, 32, 32, 3)).astype(np.float32)
    y = np.arange(64) % 10
    feed = Feed.of({**cfg, "trainer": {**cfg.trainer, "data_workers": 1}})
    make = lambda: training_batches(x, y, 10, **feed.pipeline(x, None), seed=3)
    a, b = make(), make()
    assert a.augment is not None and a.mixer is not None and a.passes == 3
    images, targets = a[1]
    assert np.array_equal(images, b[1][0]) and np.array_equal(targets, b[1][1])
    assert images.dtype == np.float32 and not np.array_equal(images, x[a.order[16:32]])
    assert np.allclose(targets.sum(axis=1), 1.0)
    # the model keeps only normalisation (and resizing): the same in training and inference
    chain = build_augmentation(32, x, **augmentation)
    assert [layer.name for layer in chain.layers] == ["normalization", "resize"]
    assert np.allclose(np.asarray(chain(x[:4], training=True)),
                       np.asarray(chain(x[:4], training=False)))


@pytest.mark.slow
def test_paper_cifar10_trains_end_to_end_with_the_official_pipeline(tmp_path):
    from tests.helpers.archives import make_cifar_archive

    from ablation.job import run_job

    archive = tmp_path / "cifar-10-python.tar.gz"
    make_cifar_archive(archive, False, n_train=40, n_test=10)
    cfg = compose("experiment=paper_cifar10", f"dataset.path={archive}", "trainer.epochs=1",
                  "trainer.batch_size=16", "trainer.verbose=0", "trainer.checkpoint=false",
                  "wandb.mode=disabled", "model.depth=1", "spt=true", "lsa=true")
    record = run_job(cfg, tmp_path / "run")
    assert record["status"] == "completed" and record["protocol"] == "official"
    assert record["config"]["augmentation"]["implementation"] == "official"
    assert record["epochs_completed"] == 1 and np.isfinite(record["metrics"]["test_loss"])
