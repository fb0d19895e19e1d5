"""A whole sweep, command to written report, split into where its time went (prints).

    python -m benchmarks phases                       # the card's sweep, GPU-sized
    python -m benchmarks phases experiment=smoke --cache cold --jobs-at-once 1

Runs ``python run_sweep.py -m`` in a fresh process into a fresh results
folder and times it from the command to its exit (the report is written
before it exits), then reads every job's ``timings`` from its record:

- start-up: the command's start to the first job's start (imports, config,
  the sweep's checks, the estimate's probe);
- per job, summed over jobs: data, build, compile (the first epoch's excess
  over a steady one), training, evaluation (per epoch and the final test),
  diagnostics (per epoch and final), saving the model, and the rest of the job
  (W&B, the record, checkpoints);
- the end: the last job's end to the command's exit (the report, W&B's
  finish, the process's exit).

With jobs side by side (``--jobs-at-once`` > 1) the per-job sums exceed the
wall time of the jobs' span, whose ratio is the overlap. ``--cache``: ``cold``
gives each sweep an empty JAX compilation cache, ``warm`` runs a cold sweep
first and then times a sweep that finds its programs there (both: the two).

The default sweep is the card's: spt × lsa (4 jobs) of the keras_io
experiment on ``dataset=synthetic_cifar100`` (CIFAR-100's shape and size,
random images: a timing workload, never an accuracy), bf16, W&B offline.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ablation.config.switches import card_sweep
from ablation.runs.record import find_records, read_record

DEFAULT_PHASES_SWEEP = [*card_sweep(), "dataset=synthetic_cifar100",
                        "trainer.precision=mixed_bfloat16", "wandb.mode=offline"]
JOB_PHASES = ("data", "build", "compile", "train", "evaluation", "diagnostics", "save_model",
              "other")


def job_phases(timings: dict) -> dict[str, float]:
    """One record's ``timings`` as :data:`JOB_PHASES` (seconds; they add up to the job's)."""
    t = {k: float(v or 0.0) for k, v in timings.items()}
    compile_s = t.get("first_epoch_excess", 0.0)
    phases = {"data": t.get("data", 0.0), "build": t.get("build", 0.0), "compile": compile_s,
              "train": t.get("train", 0.0) - compile_s,
              "evaluation": t.get("validation", 0.0) + t.get("test", 0.0),
              "diagnostics": t.get("epoch_diagnostics", 0.0) + t.get("diagnostics", 0.0),
              "save_model": t.get("save_model", 0.0)}
    phases["other"] = max(t.get("job", 0.0) - sum(phases.values()), 0.0)
    return phases


def split(start_unix: float, end_unix: float, records: list[dict]) -> dict:
    """The sweep's wall time and its parts, from the command's clock and the records."""
    timed = [r["timings"] for r in records if r.get("timings", {}).get("job_started_unix")]
    if not timed:
        return {"wall_s": end_unix - start_unix, "jobs": 0}
    first = min(t["job_started_unix"] for t in timed)
    last = max(t.get("job_ended_unix") or t["job_started_unix"] for t in timed)
    sums = {name: sum(job_phases(t)[name] for t in timed) for name in JOB_PHASES}
    span = last - first
    return {"wall_s": end_unix - start_unix, "jobs": len(timed), "start_up_s": first - start_unix,
            "jobs_span_s": span, "end_s": end_unix - last,
            "job_sum_s": sum(sums.values()), "overlap": sum(sums.values()) / span if span else None,
            **{f"{name}_s": value for name, value in sums.items()}}


def run_sweep(overrides: list[str], cache: Path, jobs_at_once: int) -> dict:
    """One timed sweep into a fresh results folder, with ``cache`` as its compile cache."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "run_sweep.py", "-m", *overrides, f"results_dir={tmp}",
                   f"gpu.compilation_cache={cache}", f"gpu.jobs_at_once={jobs_at_once}"]
        start = time.time()
        done = subprocess.run(command, cwd=root, capture_output=True, text=True)
        end = time.time()
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise SystemExit(f"bench phases: exit {done.returncode}\n" + "\n".join(lines[-20:]))
        records = [read_record(p) for p in find_records(Path(tmp))]
    return split(start, end, records)


def line(result: dict) -> str:
    parts = [f"wall {result['wall_s']:7.1f} s",
             f"start-up {result.get('start_up_s', 0):6.1f}",
             f"jobs' span {result.get('jobs_span_s', 0):7.1f}",
             f"end {result.get('end_s', 0):5.1f}"]
    sums = " ".join(f"{name} {result.get(name + '_s', 0):.1f}" for name in JOB_PHASES)
    overlap = result.get("overlap")
    return (", ".join(parts) + f" | summed over {result['jobs']} jobs: {sums}"
            + (f" | overlap {overlap:.2f}x" if overlap else ""))


def bench_phases(overrides: list[str], cache: str, jobs_at_once: list[int]) -> None:
    results = []
    for count in jobs_at_once:
        for state in (("cold", "warm") if cache == "both" else (cache,)):
            with tempfile.TemporaryDirectory() as cache_dir:
                if state == "warm":  # a first sweep fills the cache, the second is timed
                    run_sweep(overrides, Path(cache_dir), count)
                result = {"jobs_at_once": count, "cache": state,
                          **run_sweep(overrides, Path(cache_dir), count)}
            print(f"{count} at once, {state:>4} cache: {line(result)}", flush=True)
            results.append(result)
    print(json.dumps({"overrides": overrides, "results": results}))


def add_arguments(parser) -> None:
    parser.add_argument("overrides", nargs="*", help="run_sweep.py overrides (default: "
                        + " ".join(DEFAULT_PHASES_SWEEP) + ")")
    parser.add_argument("--cache", choices=["cold", "warm", "both"], default="both",
                        help="the JAX compilation cache each timed sweep starts with")
    parser.add_argument("--jobs-at-once", default="1,4",
                        help="comma-separated gpu.jobs_at_once values to time (default 1,4)")


def run(args) -> None:
    try:
        counts = [int(n) for n in args.jobs_at_once.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise SystemExit("bench phases: --jobs-at-once must be positive integers, e.g. 1,4")
    bench_phases(args.overrides or DEFAULT_PHASES_SWEEP, args.cache, counts)
