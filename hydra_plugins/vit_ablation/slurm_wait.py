"""Hydra's Slurm launcher (submitit) with a wait that always ends.

submitit learns that a job ended without a result file only from ``sacct``, so
where a cluster keeps no accounting database, or a job ends without a result (a
time limit, ``scancel``, a lost node, a signal), it waits forever or raises, and
Hydra ends the sweep with a traceback and no report. Here each job's wait asks
``squeue`` instead, and a job that Slurm lists as ended, or no longer lists, with
no result ``hydra.launcher.result_grace_s`` seconds later (a shared file system
may show it late) is given up: a placeholder ``JobReturn``, which the sweep's end
lists as unfinished (:mod:`hydra_plugins.vit_ablation.outcomes`).
"""
from __future__ import annotations

import contextlib
import logging
import subprocess
import time
from collections.abc import Iterator

from hydra.core.utils import JobReturn, JobStatus

from ablation.files import entries

log = logging.getLogger(__name__)

POLL_S = 5.0
# Slurm's job states after which a job runs no more (squeue --states=all)
ENDED = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                   "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT"})


def slurm_state(job_id: str) -> str | None:
    """The job's state as ``squeue`` gives it (``RUNNING``, ``TIMEOUT``, ...), or
    None when Slurm no longer knows the job; "" when ``squeue`` could not be asked."""
    try:
        done = subprocess.run(["squeue", "--noheader", "--states=all", "--jobs", str(job_id),
                               "--format=%T"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    states = done.stdout.split()
    if done.returncode == 0:
        return states[0] if states else None
    return None if "invalid job id" in done.stderr.lower() else ""


class BoundedJob:
    """A submitit job whose ``results()`` returns once Slurm is done with it."""

    def __init__(self, job, overrides: list[str], grace_s: float):
        self.job, self.overrides, self.grace_s = job, overrides, grace_s

    def __getattr__(self, name):
        return getattr(self.job, name)

    def results(self) -> list:
        grace, ended_at = self.grace_s, None
        while True:
            if self.has_result():
                return self.result()
            state = slurm_state(self.job.job_id)
            if state is None or state in ENDED:
                ended_at = ended_at or time.monotonic()
                if time.monotonic() - ended_at >= grace:
                    if self.has_result():  # written while we slept
                        return self.result()
                    return [self.without_result(state or "no longer known to Slurm")]
            elif state:  # pending, running, requeued: its result may still come
                ended_at = None
            time.sleep(min(POLL_S, grace) if ended_at else POLL_S)

    def has_result(self) -> bool:
        """Whether the job's result file is there (listing its folder, which a shared
        file system answers afresh). submitit's own ``done()`` would also call
        ``sacct``, which prints a line on each call where it fails."""
        result = self.job.paths.result_pickle
        return result in entries(result.parent)

    def result(self) -> list:
        """The job's result; a failure submitit caught outside the job's own handling
        (its folder not writable, a signal before the job could record it) is logged
        and the job is given up as without a result, so the sweep still reports."""
        from submitit.core.utils import FailedJobError, UncompletedJobError

        try:
            return self.job.results()
        except (FailedJobError, UncompletedJobError) as e:
            log.warning("Slurm job %s failed outside the job: %s", self.job.job_id,
                        str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__)
            return [self.without_result("failed in submitit")]

    def without_result(self, state: str) -> JobReturn:
        log.warning("Slurm job %s (%s) ended without a result (%s): not waited for any longer",
                    self.job.job_id, " ".join(self.overrides), state)
        ret = JobReturn(overrides=list(self.overrides), status=JobStatus.COMPLETED)
        ret.return_value = None
        return ret


@contextlib.contextmanager
def bounded_waits(job_overrides, grace_s: float) -> Iterator[None]:
    """Within the block, the jobs submitit's executor returns are :class:`BoundedJob`\\ s
    that give up ``grace_s`` after Slurm ended them (Hydra's launcher makes its
    executor and waits inside one method)."""
    import submitit

    executor_class = submitit.AutoExecutor

    class BoundedExecutor(executor_class):
        def map_array(self, *args, **kwargs):
            jobs = super().map_array(*args, **kwargs)
            return [BoundedJob(job, list(o), grace_s) for job, o in zip(jobs, job_overrides)]

    submitit.AutoExecutor = BoundedExecutor
    try:
        yield
    finally:
        submitit.AutoExecutor = executor_class
