"""The sweep as a whole: a multirun's overhead and N jobs in one process (prints).

    python -m benchmarks sweep --against /tmp/old-checkout
    python -m benchmarks jobs experiment=smoke wandb.mode=disabled --jobs 8

``sweep``: a whole multirun (``run_sweep.py -m``, the 4-job smoke sweep by
default) in a fresh process; its overhead is the wall time minus the jobs'
training time, read two ways: the records' ``train_seconds``, and the time
spent inside ``keras.Model.fit``, timed from outside the same way for any
checkout (records of different versions may start their clock at different
points of ``fit``). With ``--against`` (the root of another checkout, e.g.
``git worktree add /tmp/old <commit>``) the two alternate and the ratios of
the medians are reported.

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

from benchmarks.common import alternate, compose_config
from ablation.config.switches import card_sweep
from ablation.files import read_text
from ablation.runs.record import find_records, read_record


def bench_jobs(overrides: list[str], jobs: int) -> None:
    """``jobs`` training jobs one after another in this process (as the basic launcher).

    Per job: wall seconds, the training part (``train_seconds`` of its record),
    the rest (the job's fixed cost: data, build, compile, W&B, evaluation,
    record), and resident memory after it, so growth across jobs shows.
    """
    import resource

    from ablation.config import ConfigError, validate
    from ablation.data import DataError, check_source
    from ablation.runs.tracking import import_early
    from ablation.runtime.native_log import quiet_native_stderr

    try:  # bad overrides or data fail here, in one line, before TensorFlow loads
        config = compose_config(overrides)
        validate(config)
        check_source(config["dataset"])
    except (ConfigError, DataError) as e:
        print(f"bench jobs: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    import_early(str(config["wandb"]["mode"]))  # as run_sweep.py does: before TensorFlow
    with quiet_native_stderr():
        from ablation.runtime.keras_loader import import_keras
        from ablation.runtime.process import freeze_imported_objects

        keras = import_keras()  # as run_sweep.py's jobs do
        from ablation.job import run_job
    freeze_imported_objects()  # as run_sweep.py does

    def rss_mb() -> float:
        from ablation.files import read_text

        return int(read_text("/proc/self/statm", 1 << 12).split()[1]) \
            * resource.getpagesize() / 2**20

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


DEFAULT_SWEEP = [*card_sweep(), "experiment=smoke", "trainer.verbose=0"]


# Runs a checkout's run_sweep.py as `python run_sweep.py` would, and adds up
# the seconds spent inside keras.Model.fit (patched when Keras is first
# imported, whenever the checkout imports it) into the file argv[1] names.
FIT_TIMER = r"""
import atexit, importlib.abc, runpy, sys, time
out, fit_seconds = sys.argv[1], [0.0]

def timed(fit):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fit(*args, **kwargs)
        finally:
            fit_seconds[0] += time.perf_counter() - start
    return wrapper

class PatchKerasFit(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "keras":
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec is None:  # no Keras: the sweep says so itself
            return None
        run_module = spec.loader.exec_module
        def exec_module(module):
            run_module(module)
            module.Model.fit = timed(module.Model.fit)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, PatchKerasFit())
atexit.register(lambda: open(out, "w").write(repr(fit_seconds[0])))
sys.argv = sys.argv[2:]
runpy.run_path("run_sweep.py", run_name="__main__")
"""


def _time_sweep(root: Path, overrides: list[str]) -> dict:
    """One multirun of ``root``'s ``run_sweep.py`` into a fresh results folder."""
    with tempfile.TemporaryDirectory() as tmp:
        fit_file = Path(tmp) / "fit_seconds"
        results = Path(tmp) / "results"
        command = [sys.executable, "-c", FIT_TIMER, str(fit_file),
                   "run_sweep.py", "-m", *overrides, f"results_dir={results}"]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=root, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            if done.returncode == 2 and lines:  # refused input: run_sweep's one line says why
                raise SystemExit(f"bench sweep: {lines[-1]}")
            raise SystemExit(f"bench sweep: {root}: exit {done.returncode}\n"
                             + "\n".join(lines)[-2000:])
        records = [read_record(p) for p in find_records(results)]
        train = sum(r.get("train_seconds") or 0.0 for r in records)
        fit = float(read_text(fit_file, 1 << 12))
    return {"wall_s": wall, "train_s": train, "overhead_s": wall - train, "fit_s": fit,
            "overhead_fit_s": wall - fit, "jobs": len(records)}


def bench_sweep(overrides: list[str], rounds: int, against: str | None) -> None:
    here = Path(__file__).resolve().parents[1]  # the checkout holding run_sweep.py
    sides = {"project": here}
    if against:
        if not (Path(against) / "run_sweep.py").is_file():
            raise SystemExit(f"bench sweep: --against {against}: no run_sweep.py there")
        sides["baseline"] = Path(against).resolve()
    runs, med = alternate(
        list(sides), rounds, lambda side: _time_sweep(sides[side], overrides),
        lambda res: (f"wall {res['wall_s']:6.1f} s, training {res['train_s']:6.1f} s "
                     f"(in fit {res['fit_s']:6.1f} s), overhead {res['overhead_s']:5.1f} s "
                     f"(wall - fit {res['overhead_fit_s']:5.1f} s) ({res['jobs']} jobs)"))
    keys = ("wall_s", "train_s", "overhead_s", "fit_s", "overhead_fit_s")
    out = {"overrides": overrides, "rounds": rounds, "jobs": runs["project"][0]["jobs"],
           **{key: med("project", key) for key in keys}}
    if against:
        out.update(baseline=str(sides["baseline"]),
                   **{f"baseline_{key}": med("baseline", key) for key in keys})
        out["overhead_ratio"] = out["overhead_s"] / out["baseline_overhead_s"]
        out["overhead_fit_ratio"] = out["overhead_fit_s"] / out["baseline_overhead_fit_s"]
    print(json.dumps(out))


def add_arguments(parser) -> None:
    parser.add_argument("overrides", nargs="*", help="run_sweep.py overrides (default: the "
                        "4-job smoke sweep: " + " ".join(DEFAULT_SWEEP) + ")")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--against", help="the root of another checkout, run alternately")


def run(args) -> None:
    if args.rounds < 1:
        raise SystemExit("bench sweep: --rounds must be >= 1")
    bench_sweep(args.overrides or DEFAULT_SWEEP, args.rounds, args.against)


def add_job_arguments(parser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for run_sweep.py")
    parser.add_argument("--jobs", type=int, default=8)


def run_jobs(args) -> None:
    if args.jobs < 1:
        raise SystemExit("bench jobs: --jobs must be >= 1")
    bench_jobs(args.overrides, args.jobs)
