"""What a sweep tells its jobs: one serialised context in one environment variable.

A multirun's jobs may run in other processes (joblib, submitit, Ray, Slurm), which
inherit the environment and nothing else, so the sweep's process puts what its
jobs need into one JSON value, :data:`SWEEP_CONTEXT_ENV`. Every command starts a
fresh one; a value that is not a context reads as no context at all.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

log = logging.getLogger(__name__)

SWEEP_CONTEXT_ENV = "VIT_ABLATION_SWEEP"


@dataclass(frozen=True)
class SweepContext:
    """The sweep's facts a job needs; empty outside a sweep."""
    new_folders: tuple[str, ...] = ()  # did not exist before the command: a refusal may remove
    job_epochs: tuple[int, ...] = ()   # every job's, in job order: the per-epoch lines' ETA
    job_num: int | None = None         # the running job's position, from 0

    def position(self) -> tuple[int, list[int]] | None:
        """(this job's index, every job's epochs) inside a sweep, else None."""
        if self.job_num is None or not 0 <= self.job_num < len(self.job_epochs):
            return None
        return self.job_num, list(self.job_epochs)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> SweepContext:
        """The context ``text`` holds; an empty one for anything else."""
        if not text:
            return cls()
        try:
            value = json.loads(text)
            folders, epochs = value.get("new_folders", []), value.get("job_epochs", [])
            num = value.get("job_num")
            if not (isinstance(folders, list) and all(isinstance(v, str) for v in folders)
                    and isinstance(epochs, list) and all(type(v) is int and v >= 0 for v in epochs)
                    and (num is None or type(num) is int)):
                raise TypeError("expected lists of folders and counts, and a job number")
            return cls(new_folders=tuple(folders), job_epochs=tuple(epochs), job_num=num)
        except (ValueError, TypeError, AttributeError) as e:
            log.debug("%s is not a sweep context (%s): ignored", SWEEP_CONTEXT_ENV, e)
            return cls()


def current(environ: Mapping[str, str] | None = None) -> SweepContext:
    """The context this process runs in (``environ`` defaults to the process's)."""
    environ = os.environ if environ is None else environ
    return SweepContext.from_json(environ.get(SWEEP_CONTEXT_ENV))


def publish(context: SweepContext) -> SweepContext:
    """Make ``context`` this process's, and its future workers'."""
    os.environ[SWEEP_CONTEXT_ENV] = context.to_json()
    return context


def update(**changes) -> SweepContext:
    """The current context with ``changes``, published."""
    return publish(replace(current(), **changes))
