"""The command line run as a user runs it (or in this process, for refusals)."""
from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import ROOT

# Set (to "1") in the pytest process that runs the ``jax_backend`` tests on JAX
# (tests/test_jax_backend.py): tests/conftest.py then keeps KERAS_BACKEND=jax.
JAX_PASS = "ABLATION_TESTS_JAX_PASS"


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
    """A multirun's ``args`` with three defaults of the suite, unless they name them:
    ``estimate=false`` (its probe trains a few steps: seconds per sweep, across the
    suite's many sweeps; the shared smoke sweep keeps it on and tests/sweep/test_estimate.py
    checks it), ``report.plots=false`` (drawing the figures takes seconds a sweep; the
    shared smoke sweep draws them and tests/sweep/test_cli.py checks them) and
    ``gpu.jobs_at_once=1`` (the jobs one after another in the command's process on a
    GPU machine too, as on the CPU; tests/launchers/test_launchers.py and
    tests/sweep/test_overlap.py try the other launchers)."""
    args = list(args)
    if "-m" not in args or any(a.startswith(("--cfg", "--help")) for a in args):
        return args
    for default in ("estimate=false", "report.plots=false"):
        if not any(a.startswith(default.split("=")[0] + "=") for a in args):
            args.append(default)
    if not any(a.startswith(("gpu.jobs_at_once=", "hydra/launcher=")) for a in args):
        args.append("gpu.jobs_at_once=1")
    return args


def run_python(*argv: str, env: dict | None = None,
               timeout: float = 600) -> subprocess.CompletedProcess:
    """``python ARGV`` from the repository root in a user's environment (a fresh
    process), its output captured as text."""
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=cli_env(env),
                          capture_output=True, text=True, timeout=timeout)


def run_cli(*args: str, env: dict | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``python run_sweep.py ARGS`` as a user would, from the repository root."""
    return run_python("run_sweep.py", *suite_defaults(args), env=env, timeout=timeout)


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
