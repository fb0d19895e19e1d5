"""Training throughput: ``python -m benchmarks train`` and ``augment``.

The model a run config describes (the same Hydra overrides as
``run_sweep.py``) trains on random data of the dataset's shape (no download:
:data:`DATASET_SHAPES`) with the configured augmentation on, so each step
does the work of real training; each measurement is a fresh process
(:func:`measure`, run as ``bench train --worker``). Against a baseline the
two alternate; with ``--concurrent N``, N processes train at once (jobs
sharing one GPU) against one alone.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ablation.config.switches import switches
from ablation.runtime.accelerator import device_platform
from benchmarks.common import alternate, compose_config, run_worker, worker_env, worker_result

# Shapes of the datasets, so the benchmark needs no download: (H, W, C), classes.
DATASET_SHAPES = {
    "cifar10": ((32, 32, 3), 10),
    "cifar100": ((32, 32, 3), 100),
    "mnist": ((28, 28, 1), 10),
    "fashion_mnist": ((28, 28, 1), 10),
    "digits": ((8, 8, 1), 10),
}


def dataset_shape(config: dict) -> tuple[tuple[int, int, int], int]:
    name = config["dataset"]["name"]
    if name not in DATASET_SHAPES:
        raise SystemExit(f"bench train: no known shape for dataset {name!r} "
                         f"(known: {', '.join(DATASET_SHAPES)})")
    return DATASET_SHAPES[name]


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure(which: str, overrides: list[str], steps: int, warmup: int,
            baseline: str | None) -> dict:
    """One fresh process's figures: build, compile, warm up, time ``steps`` steps."""
    import keras

    config = compose_config(overrides)
    shape, classes = dataset_shape(config)
    batch = int(config["trainer"]["batch_size"])
    precision = str(config["trainer"].get("precision", "float32"))
    keras.utils.set_random_seed(int(config["seed"]))
    rng = np.random.default_rng(0)
    n = batch * (steps + warmup)
    x = rng.integers(0, 256, (n, *shape)).astype("float32")
    y = rng.integers(0, classes, (n, 1))
    if which == "baseline":
        import importlib.util

        spec = importlib.util.spec_from_file_location("bench_baseline", baseline)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        vanilla = not any(switches(config).values())
        model = module.compile_like_example(module.build(
            vanilla=vanilla, num_classes=classes, input_shape=shape, x_adapt=x[:1024]))
        precision = "float32"
    else:
        from ablation.model import build_model
        from ablation.train.compile import compile_model

        keras.mixed_precision.set_global_policy(precision)
        model = build_model(config, classes, shape, normalization_data=x[:1024])
        compile_model(model, config["trainer"], steps_per_epoch=steps + warmup,
                      num_classes=classes)
    warm_x, warm_y = x[: batch * warmup], y[: batch * warmup]
    model.fit(warm_x, warm_y, batch_size=batch, epochs=1, verbose=0)
    started = time.time()  # the clock other processes share: did timed windows overlap?
    cpu, wall = time.process_time(), time.perf_counter()
    model.fit(x[batch * warmup:], y[batch * warmup:], batch_size=batch, epochs=1, verbose=0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    images = batch * steps
    model.predict(warm_x[:batch], batch_size=batch, verbose=0)  # trace the predict step
    t = time.perf_counter()
    model.predict(x[batch * warmup:], batch_size=batch, verbose=0)
    eval_wall = time.perf_counter() - t
    return {"which": which, "params": int(model.count_params()),
            "train_images_per_s": images / wall, "cpu_ms_per_image": 1000 * cpu / images,
            "eval_images_per_s": images / eval_wall, "peak_rss_mb": _peak_rss_mb(),
            "backend": keras.backend.backend(), "device": device_platform(),
            "precision": precision, "batch_size": batch,
            "timed_window": [started, started + wall]}


def _worker_command(which: str, args) -> list[str]:
    cmd = [sys.executable, "-m", "benchmarks", "train", "--worker", which,
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    if args.baseline:
        cmd += ["--baseline", args.baseline]
    return cmd + args.overrides


def _run_worker(which: str, args) -> dict:
    return run_worker("bench train", which, _worker_command(which, args))


def _run_concurrently(args) -> dict:
    """``args.concurrent`` project processes at once (jobs sharing one device):
    each one's images/s, their sum, and how long all their timed windows overlapped."""
    # memory taken as needed, as gpu.share_memory does (JAX; TensorFlow)
    env = worker_env({**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                      "TF_FORCE_GPU_ALLOW_GROWTH": "true"})
    # output to files, not pipes: a worker blocked on a full pipe would stall its timing
    files = [(tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+"))
             for _ in range(args.concurrent)]
    procs = []
    try:
        procs = [subprocess.Popen(_worker_command("project", args), stdout=out, stderr=err,
                                  text=True, env=env) for out, err in files]
        results = []
        for proc, (out, err) in zip(procs, files):
            proc.wait()
            out.seek(0), err.seek(0)
            results.append(worker_result("bench train", "project", proc.returncode, out.read(),
                                         err.read()))
    finally:  # one failed: stop the others, which would hold the device
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
        for out, err in files:
            out.close(), err.close()
    windows = [r["timed_window"] for r in results]
    first = results[0]
    return {**{k: first[k] for k in ("params", "backend", "device", "precision", "batch_size")},
            "processes": len(results),
            "train_images_per_s": sum(r["train_images_per_s"] for r in results),
            "per_process_images_per_s": [r["train_images_per_s"] for r in results],
            # every image over the span from the first start to the last end: a lower
            # bound of the total, right whether or not the windows overlapped
            "union_images_per_s": args.steps * first["batch_size"] * len(results)
            / (max(b for _, b in windows) - min(a for a, _ in windows)),
            "overlap_s": max(0.0, min(b for _, b in windows) - max(a for a, _ in windows)),
            "window_s": max(b - a for a, b in windows)}


def bench_train(args) -> None:
    if args.baseline and not Path(args.baseline).is_file():
        raise SystemExit(f"bench train: --baseline {args.baseline}: no such file")
    from ablation.config import ConfigError, validate

    try:  # bad overrides fail here, in one line, before any process starts
        validate(compose_config(args.overrides))
    except ConfigError as e:
        print(f"bench train: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.concurrent > 1:
        bench_concurrent(args)
        return
    order = ["project", "baseline"] if args.baseline else ["project"]
    runs, med = alternate(
        order, args.rounds, lambda which: _run_worker(which, args),
        lambda res: (f"{res['train_images_per_s']:7.1f} images/s "
                     f"{res['cpu_ms_per_image']:6.2f} CPU ms/image "
                     f"eval {res['eval_images_per_s']:7.1f} images/s"))
    first = runs["project"][0]
    out = {"params": first["params"],
           "train_images_per_s": med("project", "train_images_per_s"),
           "cpu_ms_per_image": med("project", "cpu_ms_per_image"),
           "eval_images_per_s": med("project", "eval_images_per_s"),
           "peak_rss_mb": max(r["peak_rss_mb"] for r in runs["project"]),
           "backend": first["backend"], "device": first["device"],
           "precision": first["precision"], "batch_size": first["batch_size"],
           "rounds": args.rounds, "steps": args.steps, "overrides": args.overrides}
    if args.baseline:
        pairs = list(zip(runs["project"], runs["baseline"]))
        out.update({
            "baseline_params": runs["baseline"][0]["params"],
            "baseline_train_images_per_s": med("baseline", "train_images_per_s"),
            "baseline_cpu_ms_per_image": med("baseline", "cpu_ms_per_image"),
            "baseline_eval_images_per_s": med("baseline", "eval_images_per_s"),
            "baseline_peak_rss_mb": max(r["peak_rss_mb"] for r in runs["baseline"]),
            # median of the round-by-round ratios: each pair ran back to back
            "ratio": statistics.median(a["train_images_per_s"] / b["train_images_per_s"]
                                       for a, b in pairs),
            "cpu_ratio": statistics.median(b["cpu_ms_per_image"] / a["cpu_ms_per_image"]
                                           for a, b in pairs),
        })
    print(f"\n{'':>22} {'project':>10}" + (f" {'baseline':>10} {'ratio':>7}" if args.baseline else ""))
    rows = [("params", "params", "baseline_params", None),
            ("train images/s", "train_images_per_s", "baseline_train_images_per_s", "ratio"),
            ("CPU ms / image", "cpu_ms_per_image", "baseline_cpu_ms_per_image", "cpu_ratio"),
            ("eval images/s", "eval_images_per_s", "baseline_eval_images_per_s", None),
            ("peak RSS MB", "peak_rss_mb", "baseline_peak_rss_mb", None)]
    for label, key, base_key, ratio_key in rows:
        line = f"{label:>22} {out[key]:>10.6g}"
        if args.baseline:
            line += f" {out[base_key]:>10.6g}"
            line += f" {out[ratio_key]:>7.2f}" if ratio_key else ""
        print(line)
    print(f"{out['backend']} on {out['device']}, {out['precision']}, batch {out['batch_size']}, "
          f"median of {args.rounds} rounds of {args.steps} steps (fresh process each)")
    print(json.dumps(out))


def bench_concurrent(args) -> None:
    """Jobs sharing one device: the total images/s of ``--concurrent`` processes
    training at once against one alone, alternating (one alone, then N, per round)."""
    runs, med = alternate(
        ["alone", "shared"], args.rounds,
        lambda side: _run_concurrently(argparse.Namespace(
            **{**vars(args), "concurrent": 1 if side == "alone" else args.concurrent})),
        lambda res: (f"{res['processes']} process(es): {res['train_images_per_s']:8.1f} images/s "
                     f"in all ({', '.join(f'{v:.1f}' for v in res['per_process_images_per_s'])}), "
                     f"windows {res['window_s']:.1f} s, all overlapping {res['overlap_s']:.1f} s"))
    shared = runs["shared"][0]
    out = {**{k: shared[k] for k in ("params", "backend", "device", "precision", "batch_size")},
           "concurrent": args.concurrent,
           "train_images_per_s": med("shared", "train_images_per_s"),
           "alone_train_images_per_s": med("alone", "train_images_per_s"),
           "union_images_per_s": med("shared", "union_images_per_s"),
           "overlap_s": med("shared", "overlap_s"), "window_s": med("shared", "window_s"),
           "rounds": args.rounds, "steps": args.steps, "overrides": args.overrides}
    out["sharing_ratio"] = out["train_images_per_s"] / out["alone_train_images_per_s"]
    if out["overlap_s"] < 0.5 * out["window_s"]:
        print("\nwarning: the processes' timed windows overlapped for less than half their "
              "length, so their sum overstates what they do together; raise --steps",
              file=sys.stderr)
    print(f"\n{args.concurrent} processes at once: {out['train_images_per_s']:.1f} images/s in all; "
          f"one alone: {out['alone_train_images_per_s']:.1f} (x{out['sharing_ratio']:.2f}); "
          f"{out['backend']} on {out['device']}, {out['precision']}, batch {out['batch_size']}. "
          f"The sum holds while the timed windows overlap ({out['overlap_s']:.1f} of "
          f"{out['window_s']:.1f} s; first start to last end: {out['union_images_per_s']:.1f} "
          f"images/s): give --steps enough to dwarf the start-up differences.")
    print(json.dumps(out))


def add_arguments(parser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for run_sweep.py")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per process")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (tracing)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes of each")
    parser.add_argument("--baseline", help="module with build(vanilla=...) and "
                        "compile_like_example(model), e.g. the keras.io reference")
    parser.add_argument("--concurrent", type=int, default=1, metavar="N",
                        help="N processes training at once (jobs sharing one GPU), "
                        "against one alone")
    parser.add_argument("--worker", choices=["project", "baseline"], help=argparse.SUPPRESS)


def run(args) -> None:
    if args.worker:  # one fresh process of a round, started by bench_train
        print(json.dumps(measure(args.worker, args.overrides, args.steps, args.warmup,
                                 args.baseline)))
        return
    if args.rounds < 1 or args.steps < 1 or args.warmup < 1 or args.concurrent < 1:
        raise SystemExit("bench train: --rounds, --steps, --warmup and --concurrent "
                         "must be >= 1")
    if args.concurrent > 1 and args.baseline:
        raise SystemExit("bench train: --concurrent runs the project alone; drop --baseline")
    bench_train(args)
