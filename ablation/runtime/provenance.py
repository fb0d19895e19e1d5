"""Which code, libraries and device made a run: the ``environment`` of every record.

Every record states this package's version and, from a git checkout, the commit
and whether :data:`CODE_PATHS` changed since; the library versions; the device.
Read once per process: the code a process runs was loaded when it started, so a
later edit of the checkout does not describe it. Every probe is best effort (what
cannot be read is null), and git runs without taking its index lock.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import ablation

# What an attempt whose code was never recorded (an older checkpoint) ran.
UNKNOWN_CODE = {"version": None, "commit": None, "dirty": None}
# The paths whose changes change what a run computes.
CODE_PATHS = ("ablation", "conf", "run_sweep.py", "pyproject.toml")
_TIMEOUT = 10


def _output(program: str, *args: str) -> str | None:
    """``program args``'s standard output, or None (not installed, failed, slow)."""
    path = shutil.which(program)
    if path is None:
        return None
    try:
        done = subprocess.run([path, *args], capture_output=True, text=True,
                              timeout=_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _git(root: Path, *args: str) -> str | None:
    """``git -C root args`` output (without its index lock or fsmonitor hook), or None."""
    return _output("git", "--no-optional-locks", "-C", str(root), "-c", "core.fsmonitor=false",
                   *args)


@functools.lru_cache(maxsize=1)
def code_state() -> dict:
    """``version``, and ``commit`` and ``dirty`` (None outside a git checkout,
    e.g. an installed wheel, or where git cannot say)."""
    root = Path(ablation.__file__).resolve().parent.parent
    state = {"version": ablation.__version__, "commit": None, "dirty": None}
    if not (root / ".git").exists():
        return state
    commit = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain", "--", *CODE_PATHS)
    if commit:
        state["commit"] = commit.strip()
    if status is not None:
        state["dirty"] = bool(status.strip())
    return state


def _cpu_model() -> str | None:
    from ablation.files import read_text

    with contextlib.suppress(OSError):
        for line in read_text("/proc/cpuinfo", 1 << 22, errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _nvidia_driver() -> str | None:
    lines = (_output("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
             or "").strip().splitlines()
    return lines[0].strip() if lines else None


def _gpus(backend: str) -> dict:
    """``gpu`` (name), ``gpu_count``, ``cuda``, ``cudnn`` as the loaded backend reports them."""
    out = {"gpu": None, "gpu_count": 0, "cuda": None, "cudnn": None}
    if backend == "jax":
        import jax

        devices = [d for d in jax.devices() if d.platform == "gpu"]
        if devices:
            out.update(gpu=str(devices[0].device_kind), gpu_count=len(devices))
    elif backend == "torch":
        import torch

        if torch.cuda.is_available():
            out.update(gpu=torch.cuda.get_device_name(0), gpu_count=torch.cuda.device_count(),
                       cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    elif backend == "tensorflow":
        import tensorflow as tf

        devices = tf.config.list_physical_devices("GPU")
        if devices:
            details = tf.config.experimental.get_device_details(devices[0])
            build = tf.sysconfig.get_build_info()
            out.update(gpu=details.get("device_name"), gpu_count=len(devices),
                       cuda=build.get("cuda_version"), cudnn=build.get("cudnn_version"))
    return out


def _backend_version(backend: str) -> str | None:
    module = sys.modules.get(backend)
    return str(getattr(module, "__version__", None) or "") or None


def environment() -> dict:
    """The record's ``environment``: ``backend``, ``keras``, ``python``, ``host``,
    ``backend_version``, ``numpy``, ``code`` (:func:`code_state`)
    and ``device`` (``cpu``, ``gpu``, ``gpu_count``, ``driver``, ``cuda``, ``cudnn``).
    Imports Keras (and so its backend)."""
    return copy.deepcopy(_environment())


@functools.lru_cache(maxsize=1)
def _environment() -> dict:
    import keras
    import numpy

    backend = keras.backend.backend()
    try:
        gpus = _gpus(backend)
    except Exception:  # noqa: BLE001 - a device query that fails leaves the fields null
        gpus = {"gpu": None, "gpu_count": None, "cuda": None, "cudnn": None}
    return {
        "backend": backend,
        "keras": keras.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
        "backend_version": _backend_version(backend),
        "numpy": numpy.__version__,
        "code": code_state(),
        "device": {"cpu": _cpu_model(), **gpus,
                   "driver": _nvidia_driver() if gpus.get("gpu") else None},
    }


def code_history(earlier: list | None) -> list[dict]:
    """The code of every attempt of a run, in order, this one last: ``earlier``
    (a checkpoint's list) and this process's :func:`code_state` when it differs
    from the last. More than one entry: the run was resumed under other code."""
    history = [dict(code) for code in (earlier or []) if isinstance(code, dict)]
    current = code_state()
    return history if history and history[-1] == current else [*history, dict(current)]


def describe_code(code: dict | None) -> str:
    """``0.1.0 @ 1a2b3c4`` (``+changes`` when dirty), ``0.1.0``, or ``(version not recorded)``."""
    if not isinstance(code, dict) or not code.get("version"):
        return "(version not recorded)"
    text = str(code["version"])
    if code.get("commit"):
        text += f" @ {str(code['commit'])[:7]}"
        if code.get("dirty"):
            text += "+changes"
    return text
