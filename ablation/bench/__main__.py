"""Benchmarks that print figures (never timed unit tests), behind one entry point.

    python -m ablation.bench report --records 10000
    python -m ablation.bench train model=keras_io spt=true lsa=true \
        --baseline ../shared/reference/keras_io_vit_small_ds.py
    python -m ablation.bench train model=keras_io trainer.precision=mixed_bfloat16 \
        --concurrent 4 --steps 1000
    python -m ablation.bench augment model=keras_io
    python -m ablation.bench sweep --against /tmp/old-checkout
    python -m ablation.bench jobs experiment=smoke wandb.mode=disabled --jobs 8
    python -m ablation.bench diagnostics --model keras_io --steps 5
    python -m ablation.bench pipeline --batch-size 128
    python -m ablation.bench phases --cache both --jobs-at-once 1,4
    python -m ablation.bench peer --official ../SPT_LSA_ViT --peer-python ../torch/bin/python

``report``: the reporter on synthetic records (:mod:`ablation.bench.report`).
``train``, ``augment``: training throughput of the model a run config
describes, on random data of the dataset's shape, optionally alternating
with a baseline in fresh processes (:mod:`ablation.bench.train`).
``sweep``, ``jobs``: a whole multirun's overhead, and N jobs in one process
(:mod:`ablation.bench.sweep`). ``diagnostics``: what the per-epoch locality
probe costs against an epoch (:mod:`ablation.bench.diagnostics`).
``pipeline``: the input pipeline against the model's training speed
(:mod:`ablation.bench.pipeline`). ``phases``: a whole sweep, command to report,
split into start-up, compilation, training, evaluation, diagnostics and the
report, cold and warm compilation cache, one job at a time and side by side
(:mod:`ablation.bench.phases`). ``peer``: the official PyTorch code's training
step against ``model=paper``, alternating (:mod:`ablation.bench.peer`). Nothing in
the product imports this package.
"""
from __future__ import annotations

import argparse
import json
import os


def parser() -> argparse.ArgumentParser:
    from ablation.bench import diagnostics, peer, phases, pipeline
    from ablation.bench.sweep import DEFAULT_SWEEP

    top = argparse.ArgumentParser(prog="python -m ablation.bench",
                                  description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="what", required=True)
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
    diagnostics.add_arguments(sub.add_parser(
        "diagnostics", help="the locality probe's cost against a training epoch"))
    pipeline.add_arguments(sub.add_parser(
        "pipeline", help="the input pipeline's images/s against the model's training"))
    phases.add_arguments(sub.add_parser(
        "phases", help="a whole sweep, command to report, split into where its time went"))
    peer.add_arguments(sub.add_parser(
        "peer", help="the official PyTorch code's training step against model=paper"))
    return top


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.what == "report":
        from ablation.bench.report import bench_report

        bench_report(args.records, args.plots)
    elif args.what == "sweep":
        from ablation.bench.sweep import DEFAULT_SWEEP, bench_sweep

        if args.rounds < 1:
            raise SystemExit("bench sweep: --rounds must be >= 1")
        bench_sweep(args.overrides or DEFAULT_SWEEP, args.rounds, args.against)
    elif args.what == "jobs":
        from ablation.bench.sweep import bench_jobs

        if args.jobs < 1:
            raise SystemExit("bench jobs: --jobs must be >= 1")
        bench_jobs(args.overrides, args.jobs)
    elif args.what == "augment":
        from ablation.bench.augment import bench_augment

        bench_augment(args.overrides, args.batch, args.steps)
    elif args.what == "diagnostics":
        from ablation.bench import diagnostics

        diagnostics.run(args)
    elif args.what == "pipeline":
        from ablation.bench import pipeline

        pipeline.run(args)
    elif args.what == "peer":
        from ablation.bench import peer

        peer.run(args)
    elif args.what == "phases":
        from ablation.bench.phases import DEFAULT_PHASES_SWEEP, bench_phases

        try:
            counts = [int(n) for n in args.jobs_at_once.split(",")]
        except ValueError:
            counts = []
        if not counts or min(counts) < 1:
            raise SystemExit("bench phases: --jobs-at-once must be positive integers, e.g. 1,4")
        bench_phases(args.overrides or DEFAULT_PHASES_SWEEP, args.cache, counts)
    elif args.worker:
        from ablation.bench.train import measure

        print(json.dumps(measure(args.worker, args.overrides, args.steps, args.warmup,
                                 args.baseline)))
    else:
        from ablation.bench.train import bench_train

        if args.rounds < 1 or args.steps < 1 or args.warmup < 1 or args.concurrent < 1:
            raise SystemExit("bench train: --rounds, --steps, --warmup and --concurrent "
                             "must be >= 1")
        if args.concurrent > 1 and args.baseline:
            raise SystemExit("bench train: --concurrent runs the project alone; "
                             "drop --baseline")
        bench_train(args)


if __name__ == "__main__":
    main()
