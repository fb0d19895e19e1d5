"""The input pipeline's images/s (Mixup/CutMix on every batch) against model=paper's
training images/s on this machine.

    python -m benchmarks pipeline --batch-size 128 --batches 60 --model-steps 4
"""
from __future__ import annotations



def benchmark(batch_size: int = 128, batches: int = 60, model_steps: int = 4) -> dict:
    """Images/s of the pipeline alone (CIFAR-shaped, mixing on every batch: the
    official recipe mixes half of them) with 1 and ``os.cpu_count()`` worker
    threads, and of ``model=paper``'s SL-ViT training steps on the same batches,
    with a flip only and with the recipe's per-image Keras layers (crop, RandAugment,
    erasing) inside the model; prints both and the ratio."""
    import os
    import time
    from concurrent.futures import ThreadPoolExecutor

    import keras
    import numpy as np

    from ablation.data.batches import Mixer, TrainingBatches
    from ablation.model import build_vit

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (batch_size * 8, 32, 32, 3)).astype(np.float32)
    y = rng.integers(0, 100, len(x))
    data = TrainingBatches(x, y, 100, batch_size, passes=3,
                           mixer=Mixer(probability=1.0, seed=0), seed=0)
    data[0]  # first call builds the layers
    rates = {}
    for workers in sorted({1, os.cpu_count() or 1}):
        start = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:  # as PyDataset's thread workers
            list(pool.map(lambda i: data[i % len(data)], range(batches)))
        rates[workers] = batches * batch_size / (time.perf_counter() - start)
    pipeline = max(rates.values())

    model_rates = {}
    recipes = {"flip only": {"horizontal_flip": True},
               "crop, RandAugment, erasing": {"horizontal_flip": True, "crop_padding": 4,
                                              "policy": "randaugment", "random_erasing": 0.25}}
    for label, recipe in recipes.items():
        keras.utils.set_random_seed(0)
        model = build_vit(100, (32, 32, 3), spt=True, lsa=True, learnable_temperature=True,
                          image_size=32, patch_size=4, dim=192, depth=9, num_heads=12,
                          key_dim=16, mlp_hidden_units=[384], mlp_output_units=192,
                          pooling="class_token", temperature_per_head=True,
                          temperature_form="multiply", qkv_bias=False, drop_path=0.1,
                          augmentation=recipe, normalization=x[:256])
        model.compile(optimizer="adamw", loss=keras.losses.CategoricalCrossentropy(
            from_logits=True, label_smoothing=0.1))
        model.train_on_batch(*data[0])  # tracing
        start = time.perf_counter()
        for i in range(model_steps):
            model.train_on_batch(*data[i + 1])
        model_rates[label] = model_steps * batch_size / (time.perf_counter() - start)
    model_rate = max(model_rates.values())
    models = "; ".join(f"{k} {v:,.1f}" for k, v in model_rates.items())
    threads = ", ".join(f"{w} thread(s) {r:,.0f}" for w, r in rates.items())
    print(f"backend {keras.backend.backend()}, {os.cpu_count()} CPUs, batch {batch_size}: "
          f"pipeline, every batch mixed: {threads} images/s; model=paper SL-ViT training "
          f"(per-image augmentation inside): {models} images/s; pipeline / fastest model "
          f"{pipeline / model_rate:,.1f}x")
    return {"pipeline_images_per_s": rates, "model_images_per_s": model_rates}


def add_arguments(parser) -> None:
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--batches", type=int, default=60, help="pipeline batches timed")
    parser.add_argument("--model-steps", type=int, default=4, help="model steps timed")


def run(args) -> None:
    benchmark(args.batch_size, args.batches, args.model_steps)
