"""What a sweep tells its jobs: one serialised context in one environment variable.

A multirun's jobs may run in other processes (joblib, submitit, Ray, Slurm),
which inherit the environment and nothing else. So before Hydra writes
anything, the sweep's process puts what its jobs need to know into one JSON
value, :data:`SWEEP_CONTEXT_ENV`; each job reads it, and adds its own
position when it starts:

- ``new_folders``: the folders that did not exist before the command, the
  only ones a refusal may remove (:mod:`ablation.sweep.cleanup`);
- ``job_epochs``: every job's epochs, in job order, for the per-epoch lines'
  sweep share and ETA (:mod:`ablation.train.progress`);
- ``job_num``: the running job's position in the sweep, from 0.

Every command starts a fresh context, so nothing inherited from an enclosing
shell or an earlier command carries over. A value that is not a context (a
hand-set variable) reads as no context at all: every field is optional.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace

log = logging.getLogger(__name__)

SWEEP_CONTEXT_ENV = "VIT_ABLATION_SWEEP"


@dataclass(frozen=True)
class SweepContext:
    """The sweep's facts a job needs; empty outside a sweep."""
    new_folders: tuple[str, ...] = ()
    job_epochs: tuple[int, ...] = field(default=())
    job_num: int | None = None

    @property
    def jobs(self) -> int | None:
        """How many jobs the sweep runs, when known."""
        return len(self.job_epochs) or None

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
            return cls(
                new_folders=tuple(_strings(value.get("new_folders", []))),
                job_epochs=tuple(_ints(value.get("job_epochs", []))),
                job_num=_optional(value.get("job_num"), int))
        except (ValueError, TypeError, AttributeError) as e:
            log.debug("%s is not a sweep context (%s): ignored", SWEEP_CONTEXT_ENV, e)
            return cls()


def _strings(values) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise TypeError("expected a list of strings")
    return values


def _ints(values) -> list[int]:
    if not isinstance(values, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise TypeError("expected a list of counts")
    return values


def _optional(value, kind):
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise TypeError(f"expected {kind.__name__} or null")


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
