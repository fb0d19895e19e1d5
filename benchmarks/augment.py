"""The augmentation alone, in training mode: images/s of the fused affine resample
against the keras.io example's chained layers; or, for
``augmentation.implementation=official``, the input pipeline's per-image recipe
and mixing on one core against the model's training rate.

    python -m benchmarks augment model=keras_io --batch 256 --steps 5
    python -m benchmarks augment experiment=paper_cifar100 spt=true lsa=true \
        --batch 128 --steps 20
"""
from __future__ import annotations

import time

import numpy as np

from benchmarks.common import compose_config
from benchmarks.train import dataset_shape


def bench_augment(overrides: list[str], batch: int, steps: int) -> None:
    """Images/s of the augmentation alone (training mode), both implementations."""
    import keras

    from ablation.augment import build_augmentation

    config = compose_config(overrides)
    if config["augmentation"].get("implementation") == "official":
        return bench_official(config, batch, steps)
    shape, _ = dataset_shape(config)
    x = np.random.default_rng(0).integers(0, 256, (batch, *shape)).astype("float32")
    size = int(config["model"]["image_size"])
    options = {k: v for k, v in config["augmentation"].items() if k != "implementation"}
    for implementation in ("fused", "keras_layers"):
        layer = build_augmentation(size, x, seed=0, implementation=implementation, **options)
        if keras.backend.backend() == "jax":
            import jax

            layer(x[:2])
            state = [v.value for v in layer.non_trainable_variables]

            def step(state, images):
                out, new_state = layer.stateless_call([], state, images, training=True)
                return out, new_state
            step = jax.jit(step)
            run = lambda: step(state, x)[0].block_until_ready()  # noqa: E731
        elif keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            fn = tf.function(lambda images: layer(images, training=True))
            run = lambda: fn(x).numpy()  # noqa: E731
        else:
            run = lambda: keras.ops.convert_to_numpy(layer(x, training=True))  # noqa: E731
        run()
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(steps):
            run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"{keras.backend.backend():>10} {implementation:>12}: "
              f"{batch * steps / wall:9.1f} images/s {1000 * cpu / (batch * steps):7.3f} CPU ms/image",
              flush=True)


def bench_official(config, batch: int, steps: int) -> None:
    """The official pipeline (per-image recipe then Mixup/CutMix, every batch mixed) on
    one thread, in images/s and CPU ms per image, then three training steps of the
    config's model on its output: how many cores the pipeline needs to feed it."""
    import keras

    from ablation.augment.normalization import channel_statistics
    from ablation.augment.official import from_config
    from ablation.data.batches import Mixer, TrainingBatches
    from ablation.model import build_model
    from ablation.train.compile import compile_model

    shape, classes = dataset_shape(config)
    x = np.random.default_rng(0).integers(0, 256, (batch * max(steps, 4), *shape))
    x = x.astype("float32")
    y = np.arange(len(x)) % classes
    data = TrainingBatches(x, y, classes, batch, mixer=Mixer(1.0, seed=0),
                           augment=from_config(config["augmentation"], channel_statistics(x)), seed=0)
    data[0]
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(steps):
        data[i % len(data)]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    per_core = batch * steps / cpu
    print(f"official pipeline, 1 thread: {batch * steps / wall:9.1f} images/s "
          f"{1000 * cpu / (batch * steps):7.3f} CPU ms/image ({per_core:,.0f} images/s per "
          f"core)", flush=True)
    keras.utils.set_random_seed(0)
    model = build_model(config, classes, shape, normalization_data=x[:256])
    compile_model(model, config["trainer"], 100, classes, soft_targets=True)
    model.train_on_batch(*data[0])  # tracing
    wall = time.perf_counter()
    for i in range(3):
        model.train_on_batch(*data[i + 1])
    rate = 3 * batch / (time.perf_counter() - wall)
    print(f"{keras.backend.backend()} model {config['model']['name']} training: "
          f"{rate:9.1f} images/s; the pipeline needs {rate / per_core:.2f} cores to feed it; "
          f"per 1,000 images/s of an accelerator: {1000 / per_core:.2f} cores", flush=True)


def add_arguments(parser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for run_sweep.py")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=5)


def run(args) -> None:
    bench_augment(args.overrides, args.batch, args.steps)
