"""The augmentation alone, in training mode: images/s of the fused affine resample
against the keras.io example's chained layers.

    python -m ablation.bench augment model=keras_io --batch 256 --steps 5
"""
from __future__ import annotations

import time

import numpy as np

from ablation.bench.common import compose_config
from ablation.bench.train import dataset_shape


def bench_augment(overrides: list[str], batch: int, steps: int) -> None:
    """Images/s of the augmentation alone (training mode), both implementations."""
    import keras

    from ablation.augment import build_augmentation

    config = compose_config(overrides)
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
