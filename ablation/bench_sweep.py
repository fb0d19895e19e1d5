"""The sweep as a whole: a multirun's overhead and N jobs in one process (prints).

    python -m ablation.bench sweep --against /tmp/old-checkout
    python -m ablation.bench jobs experiment=smoke wandb.mode=disabled --jobs 8

``sweep``: a whole multirun (``run_sweep.py -m``, the 4-job smoke sweep by
default) in a fresh process; its overhead is the wall time minus the jobs'
training seconds (their records' ``train_seconds``). With ``--against`` (the
root of another checkout, e.g. ``git worktree add /tmp/old <commit>``) the
two alternate and the ratio of the medians is reported.

``jobs``: N jobs one after another in this process, as the basic launcher
runs them: each job's fixed cost and the resident memory after it.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ablation.bench import alternate, compose_config
from ablation.records import find_records, read_record


def bench_jobs(overrides: list[str], jobs: int) -> None:
    """``jobs`` training jobs one after another in this process (as the basic launcher).

    Per job: wall seconds, the training part (``train_seconds`` of its record),
    the rest (the job's fixed cost: data, build, compile, W&B, evaluation,
    record), and resident memory after it, so growth across jobs shows.
    """
    import resource

    from ablation.config import ConfigError, validate
    from ablation.data import DataError, check_source
    from ablation.native_log import quiet_native_stderr
    from ablation.tracking import import_early

    try:  # bad overrides or data fail here, in one line, before TensorFlow loads
        config = compose_config(overrides)
        validate(config)
        check_source(config["dataset"])
    except (ConfigError, DataError) as e:
        print(f"bench jobs: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    import_early(str(config["wandb"]["mode"]))  # as run_sweep.py does: before TensorFlow
    with quiet_native_stderr():
        from ablation.device import freeze_imported_objects, import_keras

        keras = import_keras()  # as run_sweep.py's jobs do
        from ablation.job import run_job
    freeze_imported_objects()  # as run_sweep.py does

    def rss_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20

    print(f"{'job':>4} {'wall s':>8} {'train s':>8} {'fixed s':>8} {'RSS MB':>8}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for job in range(1, jobs + 1):
            t = time.perf_counter()
            try:
                record = run_job(config, Path(tmp) / f"job{job}")
            except DataError as e:  # e.g. a dataset that cannot be downloaded offline
                print(f"bench jobs: {e}", file=sys.stderr)
                raise SystemExit(2) from None
            wall = time.perf_counter() - t
            rows.append({"job": job, "wall_s": wall, "train_s": record["train_seconds"],
                         "fixed_s": wall - record["train_seconds"], "rss_mb": rss_mb()})
            r = rows[-1]
            print(f"{job:>4} {wall:8.2f} {r['train_s']:8.2f} {r['fixed_s']:8.2f} "
                  f"{r['rss_mb']:8.1f}", flush=True)
    out = {"jobs": rows, "backend": keras.backend.backend(), "overrides": overrides}
    if jobs >= 2:
        out["rss_growth_after_2nd"] = rows[-1]["rss_mb"] / rows[1]["rss_mb"] - 1
    print(json.dumps(out))


DEFAULT_SWEEP = ["spt=true,false", "lsa=true,false", "experiment=smoke", "trainer.verbose=0"]


def _time_sweep(root: Path, overrides: list[str]) -> dict:
    """One multirun of ``root``'s ``run_sweep.py`` into a fresh results folder."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "run_sweep.py", "-m", *overrides, f"results_dir={tmp}"]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=root, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            if done.returncode == 2 and lines:  # refused input: run_sweep's one line says why
                raise SystemExit(f"bench sweep: {lines[-1]}")
            raise SystemExit(f"bench sweep: {root}: exit {done.returncode}\n"
                             + "\n".join(lines)[-2000:])
        records = [read_record(p) for p in find_records(tmp)]
        train = sum(r.get("train_seconds") or 0.0 for r in records)
    return {"wall_s": wall, "train_s": train, "overhead_s": wall - train, "jobs": len(records)}


def bench_sweep(overrides: list[str], rounds: int, against: str | None) -> None:
    here = Path(__file__).resolve().parent.parent
    sides = {"project": here}
    if against:
        if not (Path(against) / "run_sweep.py").is_file():
            raise SystemExit(f"bench sweep: --against {against}: no run_sweep.py there")
        sides["baseline"] = Path(against).resolve()
    runs, med = alternate(
        list(sides), rounds, lambda side: _time_sweep(sides[side], overrides),
        lambda res: (f"wall {res['wall_s']:6.1f} s, training {res['train_s']:6.1f} s, "
                     f"overhead {res['overhead_s']:5.1f} s ({res['jobs']} jobs)"))
    out = {"overrides": overrides, "rounds": rounds, "jobs": runs["project"][0]["jobs"],
           "wall_s": med("project", "wall_s"), "train_s": med("project", "train_s"),
           "overhead_s": med("project", "overhead_s")}
    if against:
        out.update(baseline=str(sides["baseline"]),
                   baseline_wall_s=med("baseline", "wall_s"),
                   baseline_train_s=med("baseline", "train_s"),
                   baseline_overhead_s=med("baseline", "overhead_s"))
        out["overhead_ratio"] = out["overhead_s"] / out["baseline_overhead_s"]
    print(json.dumps(out))
