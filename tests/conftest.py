"""Shared helpers: compose the real Hydra config, locate the repository."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The equivalence tests compare two formulations at float32. On a GPU, JAX's
# default float32 matrix product rounds its inputs to TF32 (10-bit mantissa), so
# two formulations differ by ~1e-3, not by float32 rounding (seen on an H100).
os.environ.setdefault("JAX_DEFAULT_MATMUL_PRECISION", "highest")

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


def compose(*overrides: str):
    """The config ``run_sweep.py`` would see for these command-line overrides."""
    from ablation.config import compose as compose_config

    return compose_config(overrides)


def cli_env(extra: dict | None = None) -> dict:
    """A user's environment for a command-line run.

    Without ``WANDB_SERVICE``: once a test has used wandb in this process, it
    is set here, and child processes would attach to this process's wandb
    service (which outlives a killed child and keeps its runs open) instead of
    starting their own as a user's command does. ``WANDB_MODE`` is dropped
    unless given, so the config decides.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SERVICE", "WANDB_MODE")}
    return {**env, "TF_CPP_MIN_LOG_LEVEL": "2", **(extra or {})}


def run_cli(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``python run_sweep.py ARGS`` as a user would, from the repository root."""
    return subprocess.run([sys.executable, "run_sweep.py", *args], cwd=ROOT, env=cli_env(env),
                          capture_output=True, text=True, timeout=timeout)


def smoke_overrides(tmp_path: Path, *extra: str) -> list[str]:
    """The smoke experiment, shortened, writing only under ``tmp_path``."""
    return ["experiment=smoke", "trainer.epochs=2", f"results_dir={tmp_path}",
            "trainer.verbose=0", *extra]


@pytest.fixture
def wandb_cli():
    """The ``wandb`` command of this environment."""
    exe = Path(sys.executable).with_name("wandb")
    assert exe.exists(), "wandb is a dependency: its command should sit beside python"
    return str(exe)


def wandb_inspect(wandb_exe: str, run_dir: Path) -> dict:
    """What W&B wrote for an offline run: summary view plus the run record's group/job type."""
    import json

    summary = json.loads(subprocess.run(
        [wandb_exe, "leet", "inspect", str(run_dir), "--summary", "--json"],
        capture_output=True, text=True, check=True).stdout)
    stream = subprocess.run([wandb_exe, "leet", "inspect", str(run_dir), "--json"],
                            capture_output=True, text=True, check=True).stdout
    records = [json.loads(line) for line in stream.splitlines() if line.strip()]
    run = next(r["run"] for r in records if r.get("type") == "run")
    history = [r for r in records if r.get("type") == "history"]
    return {**summary, "group": run.get("run_group"), "job_type": run.get("job_type"),
            "history_records": history}
