"""What the per-epoch locality diagnostics cost, relative to a training epoch (prints).

    python -m benchmarks diagnostics --model keras_io --dataset-shape 32,32,3 \\
        --classes 100 --train-images 45000 --steps 5

Builds the configured model, times ``--steps`` training steps after a warm-up
(synthetic images of the dataset's shape: only the time matters) and projects
an epoch from them (validation left out, so the ratio is an upper bound),
then times the probe pass over
``diagnostics.probe_images`` images after its own warm-up. Prints both and
their ratio. ``--real-smoke`` instead trains the smoke preset for real and
reads ``epoch_seconds`` and ``locality/seconds`` from its history.
"""
from __future__ import annotations

import math
import tempfile
import time

import numpy as np

from benchmarks.common import compose_config


def projected(args) -> None:
    import keras

    from ablation.train.locality_probe import LocalityProbe, probe_indices
    from ablation.model import build_model
    from ablation.train.compile import compile_model

    cfg = compose_config([f"model={args.model}", *args.overrides])
    shape = tuple(int(v) for v in args.dataset_shape.split(","))
    batch = int(cfg["trainer"]["batch_size"])
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(batch * (args.steps + 1), *shape)).astype("float32")
    y = rng.integers(0, args.classes, size=len(x))
    model = build_model(cfg, args.classes, shape, normalization_data=x[:batch])
    steps_per_epoch = math.ceil(args.train_images / batch)
    compile_model(model, cfg["trainer"], steps_per_epoch, args.classes)
    model.fit(x[:batch], y[:batch], batch_size=batch, epochs=1, verbose=0)  # trace
    started = time.perf_counter()
    model.fit(x[batch:], y[batch:], batch_size=batch, epochs=1, verbose=0)
    step = (time.perf_counter() - started) / args.steps
    epoch = step * steps_per_epoch
    count = int(cfg["diagnostics"]["probe_images"])
    images = rng.integers(0, 256, size=(count, *shape)).astype("float32")
    probe = LocalityProbe(images, probe_indices(count, count, 0), batch_size=batch)
    probe.measure(model)  # trace
    started = time.perf_counter()
    probe.measure(model)
    cost = time.perf_counter() - started
    print(f"model={args.model} input={shape} batch={batch} backend={keras.backend.backend()}")
    print(f"train step {step:.3f} s x {steps_per_epoch} steps = {epoch:.1f} s per epoch "
          f"(projected, training only)")
    print(f"probe pass over {count} images: {cost:.3f} s = {100 * cost / epoch:.2f} % of an epoch")


def real_smoke(args) -> None:
    from ablation.job import run_job

    out = tempfile.mkdtemp()
    record = run_job(compose_config(["experiment=smoke", "wandb.mode=disabled", "trainer.verbose=0",
                                     f"results_dir={out}", *args.overrides]), out)
    rows = record["history"][1:] or record["history"]  # the first epoch includes tracing
    epoch = float(np.mean([r["epoch_seconds"] for r in rows]))
    cost = float(np.mean([r["locality/seconds"] for r in rows]))
    probes = record["diagnostics"]["probe_images"]
    print(f"smoke preset ({record['model']}, {record['dataset']}, {probes} probe images), "
          f"epochs 2..{len(record['history'])}:")
    print(f"epoch {epoch:.3f} s, probe pass {cost:.3f} s = {100 * cost / epoch:.1f} % of an epoch")


def add_arguments(parser) -> None:
    parser.add_argument("--real-smoke", action="store_true")
    parser.add_argument("--model", default="keras_io")
    parser.add_argument("--dataset-shape", default="32,32,3")
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--train-images", type=int, default=45000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides")


def run(args) -> None:
    (real_smoke if args.real_smoke else projected)(args)
