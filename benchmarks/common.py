"""What every benchmark shares: composing the run config as the sweep command
does, alternating two sides so machine drift hits both alike, and reading a
worker process's result."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from ablation.config.compose import compose_config

__all__ = ["ROOT", "alternate", "compose_config", "run_worker", "worker_env", "worker_result"]

ROOT = Path(__file__).resolve().parents[1]  # the checkout: benchmarks/ sits beside ablation/


def worker_env(env: dict | None = None) -> dict:
    """The environment for a worker process (``python -m benchmarks ...``): the
    checkout first on its import path, whatever folder the command ran from."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


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


def worker_result(tool: str, which: str, returncode: int, stdout: str, stderr: str) -> dict:
    """A benchmark worker process's result: the JSON object on its last line. A
    failed worker's output tails go to stderr and ``tool`` exits naming it."""
    if returncode != 0:
        sys.stderr.write(stdout[-3000:] + stderr[-3000:])
        raise SystemExit(f"{tool}: the {which} process failed ({returncode})")
    return json.loads(stdout.strip().splitlines()[-1])


def run_worker(tool: str, which: str, cmd: list[str]) -> dict:
    """Run a benchmark worker process to its end; :func:`worker_result`."""
    done = subprocess.run(cmd, capture_output=True, text=True, env=worker_env())
    return worker_result(tool, which, done.returncode, done.stdout, done.stderr)
