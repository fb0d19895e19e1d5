"""Benchmarks that print figures (never timed unit tests).

    python -m ablation.bench report --records 10000
    python -m ablation.bench sweep --against /tmp/old-checkout
    python -m ablation.bench train model=keras_io spt=true lsa=true \
        --baseline ../shared/reference/keras_io_vit_small_ds.py
    python -m ablation.bench train model=keras_io trainer.precision=mixed_bfloat16 \
        --concurrent 4 --steps 1000

``train``: training throughput of the model a run config describes (the same
Hydra overrides as ``run_sweep.py``), on random data of the dataset's shape
(no download: shapes from :data:`ablation.bench_train.DATASET_SHAPES`) with the configured
augmentation on, so each step does the work of real training. With
``--baseline`` (a module with ``build(vanilla=...)`` and
``compile_like_example(model)``) the two alternate, each in a fresh process,
A B A B..., so machine drift cancels; medians are reported. With
``--concurrent N``, N processes train at once (jobs sharing one GPU) and
their total images/s is compared with one process alone. The last line
printed is one JSON object.

``train`` and ``augment`` live in :mod:`ablation.bench_train`; ``sweep`` and
``jobs``, the sweep as a whole, in :mod:`ablation.bench_sweep`.

``report``: the reporter on N synthetic records shaped like real ones
(50-epoch histories with per-layer temperatures), against a baseline in the
same run: reading and parsing the same files with ``json`` alone, the floor
any reporter pays. Prints seconds per stage and the ratio to the baseline.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from itertools import product
from pathlib import Path

import numpy as np

from ablation.records import find_records, write_record


def make_records(root: Path, count: int, epochs: int = 50, layers: int = 8) -> int:
    """``count`` records over 5 datasets x 2 models x 8 variants x seeds."""
    rng = np.random.default_rng(0)
    blocks = list(product(["cifar10", "cifar100", "fashion_mnist", "mnist", "digits"],
                          ["keras_io", "paper"]))
    variants = list(product([False, True], repeat=3))
    seeds = -(-count // (len(blocks) * len(variants)))
    written = 0
    for (dataset, model), (spt, lsa, temp), seed in product(blocks, variants, range(seeds)):
        if written == count:
            break
        top1 = 0.5 + 0.02 * (spt + lsa + temp) + rng.normal(0, 0.01)
        history = [{"epoch": e, "train/loss": 2.0 / e, "train/top1": top1 * e / epochs,
                    "train/top5": 0.8, "val/loss": 2.1 / e, "val/top1": top1 * e / epochs,
                    "val/top5": 0.8, "lr": 1e-3, "epoch_seconds": 30.0,
                    **({f"temperature/block_{i}": 8.0 for i in range(layers)} if temp else {})}
                   for e in range(1, epochs + 1)]
        config = {"dataset": {"name": dataset}, "model": {"name": model, "depth": layers},
                  "trainer": {"epochs": epochs, "learning_rate": 0.001},
                  "spt": spt, "lsa": lsa, "learnable_temperature": temp, "seed": seed,
                  "wandb": {"mode": "disabled"}}
        write_record(root / f"{dataset}-{model}-{int(spt)}{int(lsa)}{int(temp)}-s{seed}", {
            "schema": 1, "status": "completed", "variant": "x",
            "switches": {"spt": spt, "lsa": lsa, "learnable_temperature": temp},
            "dataset": dataset, "model": model, "seed": seed, "config": config,
            "metrics": {"test_top1": top1, "test_top5": top1 + 0.2, "best_val_top1": top1},
            "history": history, "params": 21_787_755, "train_seconds": 1500.0,
            "train_images_per_s": 300.0, "wandb": {"mode": "disabled"},
            "finished_at": "2026-11-22T00:00:00+00:00"})
        written += 1
    return written


def bench_report(count: int, plots: bool) -> None:
    from ablation.report import comparison, factorial, load_runs, write_report

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        make_records(root, count)
        size = sum(p.stat().st_size for p in find_records(root))
        print(f"{count} records, {size / 1e6:.1f} MB, made in {time.perf_counter() - t:.1f} s")

        cpu, t = time.process_time(), time.perf_counter()
        for p in find_records(root):
            json.loads(p.read_text())
        baseline = time.perf_counter() - t
        print(f"baseline, find + json.loads every file: {baseline:6.2f} s "
              f"({time.process_time() - cpu:.2f} CPU s)")

        stages = {}
        cpu, t = time.process_time(), time.perf_counter()
        runs = load_runs(root)
        stages["load_runs"] = time.perf_counter() - t
        t = time.perf_counter()
        comparison(runs)
        factorial(runs)
        stages["comparison + factorial"] = time.perf_counter() - t
        for name, seconds in stages.items():
            print(f"{name:>38}: {seconds:6.2f} s")
        cpu_stages = time.process_time() - cpu
        t = time.perf_counter()
        write_report(root, make_plots=plots, wandb_settings={"mode": "disabled"})
        total = time.perf_counter() - t
        label = "write_report (all outputs" + (", plots)" if plots else ", no plots)")
        print(f"{label:>38}: {total:6.2f} s")
        print(f"read and tabulate: {sum(stages.values()):.2f} s ({cpu_stages:.2f} CPU s), "
              f"{sum(stages.values()) / baseline:.1f}x the json-only baseline; "
              f"target < 10 s on the 2-core machine")


def compose_config(overrides: list[str]) -> dict:
    """The run config ``run_sweep.py`` would build from the same overrides;
    :class:`ablation.config.ConfigError` (one line) where it would refuse them."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from ablation.config import register_resolvers
    from ablation.preflight import check_composes, check_group_options

    register_resolvers()
    conf_dir = str(Path(__file__).resolve().parent.parent / "conf")
    check_group_options(list(overrides), conf_dir)  # unknown options, unparsable overrides
    check_composes(list(overrides), conf_dir)
    with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)


def alternate(sides: list[str], rounds: int, run, line):
    """Run each side once per round, A B A B..., so machine drift hits both
    alike; prints ``line(result)`` per run. Returns the runs by side and a
    ``median(side, key)`` of them."""
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in sides:
            result = run(side)
            runs[side].append(result)
            print(f"round {r + 1} {side:>8}: {line(result)}", flush=True)

    def median(side: str, key: str) -> float:
        return statistics.median(result[key] for result in runs[side])
    return runs, median


def main() -> None:
    from ablation.bench_sweep import DEFAULT_SWEEP, bench_jobs, bench_sweep
    from ablation.bench_train import bench_augment, bench_train, measure

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    report = sub.add_parser("report", help="reporter speed on synthetic records")
    report.add_argument("--records", type=int, default=10_000)
    report.add_argument("--plots", action="store_true", help="include the PNG figures")
    train = sub.add_parser("train", help="training throughput, optionally against a baseline")
    train.add_argument("overrides", nargs="*", help="Hydra overrides, as for run_sweep.py")
    train.add_argument("--steps", type=int, default=5, help="timed steps per process")
    train.add_argument("--warmup", type=int, default=2, help="untimed steps first (tracing)")
    train.add_argument("--rounds", type=int, default=3, help="fresh processes of each")
    train.add_argument("--baseline", help="module with build(vanilla=...) and "
                       "compile_like_example(model), e.g. the keras.io reference")
    train.add_argument("--concurrent", type=int, default=1, metavar="N",
                       help="N processes training at once (jobs sharing one GPU), "
                       "against one alone")
    train.add_argument("--worker", choices=["project", "baseline"], help=argparse.SUPPRESS)
    augment = sub.add_parser("augment", help="the augmentation alone, fused vs keras_layers")
    augment.add_argument("overrides", nargs="*", help="Hydra overrides, as for run_sweep.py")
    augment.add_argument("--batch", type=int, default=256)
    augment.add_argument("--steps", type=int, default=5)
    sweep = sub.add_parser("sweep", help="a whole multirun: wall time minus training time")
    sweep.add_argument("overrides", nargs="*", help="run_sweep.py overrides (default: the "
                       "4-job smoke sweep: " + " ".join(DEFAULT_SWEEP) + ")")
    sweep.add_argument("--rounds", type=int, default=2)
    sweep.add_argument("--against", help="the root of another checkout, run alternately")
    jobs = sub.add_parser("jobs", help="N jobs in one process: fixed cost and memory per job")
    jobs.add_argument("overrides", nargs="*", help="Hydra overrides, as for run_sweep.py")
    jobs.add_argument("--jobs", type=int, default=8)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.what == "report":
        bench_report(args.records, args.plots)
    elif args.what == "sweep":
        if args.rounds < 1:
            raise SystemExit("bench sweep: --rounds must be >= 1")
        bench_sweep(args.overrides or DEFAULT_SWEEP, args.rounds, args.against)
    elif args.what == "jobs":
        if args.jobs < 1:
            raise SystemExit("bench jobs: --jobs must be >= 1")
        bench_jobs(args.overrides, args.jobs)
    elif args.what == "augment":
        bench_augment(args.overrides, args.batch, args.steps)
    elif args.worker:
        print(json.dumps(measure(args.worker, args.overrides, args.steps, args.warmup,
                                 args.baseline)))
    else:
        if args.rounds < 1 or args.steps < 1 or args.warmup < 1 or args.concurrent < 1:
            raise SystemExit("bench train: --rounds, --steps, --warmup and --concurrent "
                             "must be >= 1")
        if args.concurrent > 1 and args.baseline:
            raise SystemExit("bench train: --concurrent runs the project alone; "
                             "drop --baseline")
        bench_train(args)


if __name__ == "__main__":
    main()
