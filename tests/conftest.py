"""The suite's fixtures, its process set-up and the worker count: one smoke
sweep that every test reading a sweep's outputs shares, the ``wandb`` command,
and hand-made records for the reporter's tests. Plain helpers (the config, the
command line, W&B's view of a run) are in tests/helpers/; tests import them
from there, never from here.

Lanes: ``-m "not slow"`` leaves out what trains a model, runs the command
line end to end or takes more than a few seconds (the ``slow`` marker); the
full suite is what CI runs. Both run
in worker processes (pytest-xdist, ``-n auto`` in pyproject.toml), which share
the smoke sweep and the trained checkpoint.

Tests marked ``jax_backend`` run on whatever backend this session has (TensorFlow
unless a test sets one), and once more on JAX: tests/test_jax_backend.py runs them
in one pytest process with ``KERAS_BACKEND=jax`` (``JAX_PASS`` set, which keeps
that backend here instead of clearing it).

Test modules are grouped by what they test: tests/report/ for ablation/report/,
tests/config/ for ablation/config/, and so on (tests/datasets/ for ablation/data/,
tests/launchers/ for Hydra's plugins in hydra_plugins/); what spans the package
(its structure, the paper's recipe, packaging) sits in tests/ itself.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.checkpoints import REFERENCE, train_checkpoint, trained_reference
from tests.helpers.commands import JAX_PASS, run_cli, smoke_overrides
from tests.helpers.records import TOP1, record
from tests.helpers.stops import ALARM_S, Hung

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
# VIT_ABLATION_TEST_BACKEND=torch runs a pass on another backend by hand, e.g. the
# backend-marked tests where PyTorch is installed: -m jax_backend.
_TEST_BACKEND = os.environ.get("VIT_ABLATION_TEST_BACKEND")
for _name in [n for n in os.environ if n.startswith(("WANDB_", "HYDRA_", "VIT_ABLATION_"))
              or n in ("KERAS_BACKEND", "KERAS_HOME")]:
    del os.environ[_name]
if os.environ.get(JAX_PASS) == "1":   # the jax_backend tests' own pass (test_jax_backend.py)
    os.environ["KERAS_BACKEND"] = "jax"
elif _TEST_BACKEND:
    os.environ["KERAS_BACKEND"] = _TEST_BACKEND

# Workers for ``-n auto``. Most tests wait on a child process or train a small
# model on one core, so one worker per core; at most 4, because the tests that
# time or race processes need room.
MAX_WORKERS = 4


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_xdist_auto_num_workers(config):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_WORKERS, cores or 1))


# The shared smoke sweep: every variant of spt x lsa, 2 epochs, W&B offline, the
# speed estimate and the report's figures on (the suite's other sweeps leave them out).
SMOKE_SWEEP = ["-m", "spt=true,false", "lsa=true,false", "wandb.mode=offline", "estimate=true",
               "report.plots=true"]


@pytest.fixture(scope="session")
def smoke_sweep(tmp_path_factory):
    """One 4-job smoke sweep through the real command line, made once per
    session for every test that only reads what a sweep leaves (records, W&B
    runs, the report). Tests that change it work on a copy.

    Under pytest-xdist the workers share it: the first to ask makes it, holding
    a lock in the session's base folder, and the others wait for it and read
    what it printed from a file beside it."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # above each worker's own folder
    root, printed = base / "smoke_sweep", base / "smoke_sweep.json"
    args = [*SMOKE_SWEEP, *smoke_overrides(root)]
    with open(base / "smoke_sweep.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not printed.is_file():
            root.mkdir(exist_ok=True)
            result = run_cli(*args)  # the real command, start-up included
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


@pytest.fixture
def four_by_three(tmp_path):
    for (spt, lsa), values in TOP1.items():
        for seed, v in enumerate(values):
            record(tmp_path, spt, lsa, lsa, seed, v)
    return tmp_path


@pytest.fixture(scope="session")
def trained_checkpoint(tmp_path_factory):
    """A job folder whose ``checkpoint`` holds three epochs of the smoke model, as a
    job checkpoints them, beside what the model held when training ended
    (``reference``: weights, optimizer step, random-generator states). Trained once
    a session and shared by the workers as the smoke sweep is (a lock in the
    session's base folder); tests change a copy (the ``checkpoint`` fixture)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # above each worker's own folder
    job = base / "trained_checkpoint"
    with open(base / "trained_checkpoint.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (job / REFERENCE).is_file():
            train_checkpoint(job)
    return SimpleNamespace(folder=job / "checkpoint", reference=trained_reference(job))


@pytest.fixture
def checkpoint(trained_checkpoint, tmp_path):
    """This test's copy of the trained checkpoint folder: ``tmp_path/job/checkpoint``
    (what is set aside goes to ``tmp_path/job/.replaced``)."""
    folder = tmp_path / "job" / "checkpoint"
    shutil.copytree(trained_checkpoint.folder, folder)
    return folder


@pytest.fixture
def umask_027():
    """The process umask 027 for the test: files it writes get mode 0o640 (yielded)."""
    old = os.umask(0o027)
    yield 0o640
    os.umask(old)


@pytest.fixture
def alarm():
    """A test still running after ALARM_S seconds fails (``Hung``) instead of blocking
    the suite: for tests of reads that could block (a FIFO, a device). Modules use it
    with ``pytestmark = pytest.mark.usefixtures("alarm")``."""
    def hung(signum, frame):
        raise Hung(f"still running after {ALARM_S} s: a read that blocks or never ends")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(ALARM_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
