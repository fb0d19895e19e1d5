"""One GPU per job when a sweep's jobs share a machine with several GPUs.

Jobs side by side would all compute on the first GPU, so the job numbered ``n``
takes ``devices[n % len(devices)]`` of ``gpu.devices`` (null: every visible one)
by narrowing ``CUDA_VISIBLE_DEVICES`` before the backend first looks. A process's
first job decides: a backend keeps the devices it saw first.
"""
from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

_pinned: str | None = None  # this process's GPU, once its first job chose


def driver_gpus() -> int:
    """The NVIDIA GPUs the driver lists, found without loading a framework."""
    folder = Path("/proc/driver/nvidia/gpus")
    return len(list(folder.iterdir())) if folder.is_dir() else 0


def visible_devices(env: MutableMapping[str, str], found: int) -> list[str]:
    """The GPU ids this process may use: ``CUDA_VISIBLE_DEVICES``'s entries (up to
    the first ``-1``, as CUDA reads it), else ``0 .. found-1``."""
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(found)]
    ids = []
    for entry in (e.strip() for e in listed.split(",")):
        if not entry or entry == "-1":
            break
        ids.append(entry)
    return ids


def gpu_for_job(job_num: int, devices: Sequence[str]) -> str | None:
    """The GPU the job numbered ``job_num`` takes among ``devices``, round robin;
    None without devices."""
    return devices[job_num % len(devices)] if devices else None


def chosen_devices(setting, visible: Sequence[str]) -> list[str]:
    """``gpu.devices`` as ids: null is every visible GPU; a list of ids keeps the
    visible ones in its order (an id that is not visible is left out, with a line)."""
    if setting is None:
        return list(visible)
    wanted = [str(d) for d in setting]
    missing = [d for d in wanted if d not in visible]
    if missing:
        log.warning("gpu.devices names %s, not visible here (%s): left out",
                    ", ".join(missing), ", ".join(visible) or "no GPU")
    return [d for d in wanted if d in visible]


def pin(job_num: int | None, setting, env: MutableMapping[str, str] = os.environ,
        found: int | None = None) -> str | None:
    """Narrow ``env``'s ``CUDA_VISIBLE_DEVICES`` to the job's GPU, once per
    process; the GPU this process uses, or None where nothing was chosen."""
    global _pinned
    if _pinned is not None or job_num is None:
        return _pinned
    if found is None:
        found = driver_gpus()
    devices = chosen_devices(setting, visible_devices(env, found))
    if setting is None and len(devices) < 2:  # no choice to make
        return None
    gpu = gpu_for_job(job_num, devices)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
        _pinned = gpu
        log.info("job %d computes on GPU %s", job_num, gpu)
    return gpu
