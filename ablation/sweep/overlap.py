"""On a GPU, a sweep's jobs share it: several at a time, without choosing a launcher.

A job on a GPU spends much of its time compiling (host CPU work) and, for the
small models of this suite, uses a fraction of the card while training, so jobs
side by side finish the sweep sooner (docs/performance.md). ``gpu.jobs_at_once``:
``auto`` runs up to :data:`AUTO_JOBS_AT_ONCE` at a time through Hydra's joblib
launcher where an NVIDIA GPU is visible, else one (on a CPU they would only
compete for the same cores); ``k``: up to k. A launcher named on the command
line is always used as given.
"""
from __future__ import annotations

import importlib.util
import os

from ablation.runtime.gpu_pinning import driver_gpus, visible_devices

AUTO_JOBS_AT_ONCE = 4
LAUNCHER_GROUP = "hydra/launcher"


def visible_gpus() -> int:
    """NVIDIA GPUs this process may use, found without loading a framework:
    the driver's device list, narrowed by ``CUDA_VISIBLE_DEVICES``."""
    found = driver_gpus()
    return min(found, len(visible_devices(os.environ, found)))


def jobs_at_once(setting, gpus: int) -> int:
    """How many jobs run side by side for ``gpu.jobs_at_once`` on a machine with ``gpus``."""
    if setting == "auto":
        return AUTO_JOBS_AT_ONCE if gpus else 1
    # anything but a positive integer is refused, in one line, by the config's checks
    return setting if isinstance(setting, int) and not isinstance(setting, bool) else 1


def launcher_overrides(args: list[str], setting, gpus: int | None = None) -> list[str]:
    """The overrides that make a multirun's jobs share the machine, or ``[]``
    (a single run, a command that names a launcher, one job at a time).
    ``args`` is the command line without the program."""
    if not ({"-m", "--multirun"} & set(args)):
        return []
    if any(a.lstrip("+~").startswith((LAUNCHER_GROUP + "=", "hydra.launcher.")) for a in args):
        return []
    count = jobs_at_once(setting, visible_gpus() if gpus is None else gpus)
    if count <= 1:
        return []
    if not _installed("hydra_plugins.hydra_joblib_launcher"):
        print(f"note: gpu.jobs_at_once={setting} asks for {count} jobs at a time, but the joblib "
              f"launcher is not installed (pip install hydra-joblib-launcher): one at a time",
              flush=True)
        return []
    return [f"{LAUNCHER_GROUP}=joblib", f"hydra.launcher.n_jobs={count}"]


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported; a missing parent package (no Hydra
    plugin at all, so no ``hydra_plugins``) is "no", not an error."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False
