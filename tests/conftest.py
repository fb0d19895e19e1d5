"""Shared helpers and artefacts: the real Hydra config, the command line run as
a user runs it (or in this process, for refusals), and one smoke sweep that
every test reading a sweep's outputs shares.

Lanes: ``-m "not slow"`` leaves out what trains a model or runs the command
line end to end (the ``slow`` marker); the full suite is what CI runs. Both run
in worker processes (pytest-xdist, ``-n auto`` in pyproject.toml), which share
the smoke sweep.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The equivalence tests compare two formulations at float32. On a GPU, JAX's
# default float32 matrix product rounds its inputs to TF32 (10-bit mantissa), so
# two formulations differ by ~1e-3, not by float32 rounding (seen on an H100).
os.environ.setdefault("JAX_DEFAULT_MATMUL_PRECISION", "highest")
# A suite started in the background (``pytest &`` from a script) inherits SIGINT
# ignored, as every background job does, and so would the commands it starts:
# the Ctrl-C tests need it delivered, as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Hermetic: what the caller's shell exported about W&B, Keras, Hydra or a sweep
# does not reach the tests (WANDB_SILENT=true hides lines a test reads,
# KERAS_BACKEND=jax changes every figure); a test that needs one sets it.
for _name in [n for n in os.environ if n.startswith(("WANDB_", "HYDRA_", "VIT_ABLATION_"))
              or n in ("KERAS_BACKEND", "KERAS_HOME")]:
    del os.environ[_name]

# Workers for ``-n auto``. Most tests wait on a child process or train a small
# model on one core, so one worker per core; at most 4, because the tests that
# time or race processes need room.
MAX_WORKERS = 4


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_xdist_auto_num_workers(config):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_WORKERS, cores or 1))


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


def suite_defaults(args) -> list[str]:
    """A multirun's ``args`` with two defaults of the suite, unless they name them:
    ``estimate=false`` (its probe trains a few steps: seconds per sweep, across the
    suite's many sweeps; the shared smoke sweep keeps it on and tests/test_estimate.py
    checks it) and ``gpu.jobs_at_once=1`` (the jobs one after another in the
    command's process on a GPU machine too, as on the CPU; test_launchers and
    test_overlap try the other launchers)."""
    args = list(args)
    if "-m" not in args or any(a.startswith(("--cfg", "--help")) for a in args):
        return args
    if not any(a.startswith("estimate=") for a in args):
        args.append("estimate=false")
    if not any(a.startswith(("gpu.jobs_at_once=", "hydra/launcher=")) for a in args):
        args.append("gpu.jobs_at_once=1")
    return args


JAX_HEADER = """import os, sys
os.environ["KERAS_BACKEND"] = "jax"
sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "tests")]
"""


def run_on_jax(script: str) -> str:
    """Run ``script`` in a fresh process on the JAX backend, with the repository and
    tests/ importable (so it can rerun a test module's checks); its stdout. Skipped
    without jax (the test extra installs it)."""
    pytest.importorskip("jax", reason="the test extra installs jax")
    result = subprocess.run([sys.executable, "-c", JAX_HEADER + script, str(ROOT)],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "KERAS_BACKEND": "jax"})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def run_cli(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``python run_sweep.py ARGS`` as a user would, from the repository root."""
    return subprocess.run([sys.executable, "run_sweep.py", *suite_defaults(args)], cwd=ROOT,
                          env=cli_env(env), capture_output=True, text=True, timeout=timeout)


def run_in_process(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python run_sweep.py ARGS`` in this process, for input that is refused
    before anything trains: the exit code and what it printed, as :func:`run_cli`
    returns them. The environment, working folder, argv, logging and Hydra's
    global state are put back afterwards. Hydra's logging set-up is skipped: its
    ``dictConfig`` would close every handler of this process (pytest's too), and
    a refusal is printed, not logged."""
    from hydra._internal import logging_config
    from hydra.core.global_hydra import GlobalHydra

    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    from ablation.sweep import cli  # its import sets TF_CPP_MIN_LOG_LEVEL: put back below

    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    out, err, code = io.StringIO(), io.StringIO(), 0
    os.environ.update(env or {})
    sys.argv = ["run_sweep.py", *args]
    os.chdir(ROOT)
    saved_configure = logging_config.configure_logging
    logging_config.configure_logging = lambda config: None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        logging_config.configure_logging = saved_configure
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        GlobalHydra.instance().clear()
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def smoke_overrides(tmp_path: Path, *extra: str) -> list[str]:
    """The smoke experiment, shortened, writing only under ``tmp_path``."""
    return ["experiment=smoke", "trainer.epochs=2", f"results_dir={tmp_path}",
            "trainer.verbose=0", *extra]


# The shared smoke sweep: every variant of spt x lsa, 2 epochs, W&B offline.
SMOKE_SWEEP = ["-m", "spt=true,false", "lsa=true,false", "wandb.mode=offline", "estimate=true"]


@pytest.fixture(scope="session")
def smoke_sweep(tmp_path_factory):
    """One 4-job smoke sweep through the real command line, made once per
    session for every test that only reads what a sweep leaves (records, W&B
    runs, the report). Tests that change it work on a copy.

    Under pytest-xdist the workers share it: the first to ask makes it, holding
    a lock in the session's base folder, and the others wait for it and read
    what it printed from a file beside it."""
    import fcntl
    import json

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # above each worker's own folder
    root, printed = base / "smoke_sweep", base / "smoke_sweep.json"
    args = [*SMOKE_SWEEP, *smoke_overrides(root)]
    with open(base / "smoke_sweep.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not printed.is_file():
            root.mkdir(exist_ok=True)
            result = run_cli(*args)
            assert result.returncode == 0, result.stderr[-3000:]
            printed.write_text(json.dumps({"stdout": result.stdout, "stderr": result.stderr}))
        output = json.loads(printed.read_text())
    result = subprocess.CompletedProcess(args, 0, output["stdout"], output["stderr"])
    return SimpleNamespace(root=root, result=result, args=args)


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
