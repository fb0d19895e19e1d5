"""Sweeps through a real Slurm scheduler, started on this machine.

``tests/slurm/local_cluster.sh`` starts a single-node Slurm (root, Debian's
slurm-wlm and munge); where it cannot (not root, no apt), these tests are
skipped with its reason. One machine runs one Slurm (its daemons' ports), so
the end-to-end checks are one test, in stages that run side by side where
they can:

- two identical sweeps submitted into one folder at once: records equal to
  the basic launcher's, and each job trained once;
- a time limit: Slurm sends SIGUSR2, submitit requeues the job, and it
  resumes from its checkpoint to the end (the limit is lowered once the job has a
  checkpoint, and the job is held stopped until the signal, so no machine's speed
  decides whether there is one to resume from);
- a preemption (``scontrol requeue``), then ``scancel``: the job resumes after
  the first; after the second it is ``interrupted``, the sweep stops waiting
  for it, reports, names the command that resumes it and exits 1; that
  command resumes it to the end.
"""
from __future__ import annotations

import contextlib
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ablation.runs.record import read_record
from tests.helpers.commands import cli_env, smoke_overrides, suite_defaults
from tests.helpers.launched import comparable, records_by_name
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.slow

CLUSTER = ROOT / "tests" / "slurm" / "local_cluster.sh"
# One CPU per job on the test machine's node; no GPU; the default partition.
SLURM = ["hydra/launcher=slurm", "hydra.launcher.partition=debug",
         "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1",
         "hydra.launcher.mem_gb=2",
         # A job stopped by Slurm leaves its result file at once here: no shared file system.
         "hydra.launcher.result_grace_s=3"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """The environment that reaches the local Slurm (``SLURM_CONF``)."""
    folder = tmp_path_factory.mktemp("slurm")
    started = subprocess.run(["bash", str(CLUSTER), "start", str(folder)],
                             capture_output=True, text=True, timeout=600)
    if started.returncode != 0:
        pytest.skip(f"no local Slurm: {started.stderr.strip()}")
    conf = re.search(r"SLURM_CONF=(\S+)", started.stdout)[1]
    yield cli_env({"SLURM_CONF": conf})
    subprocess.run(["bash", str(CLUSTER), "stop", str(folder)], capture_output=True,
                   timeout=120)


def one_thread(env: dict) -> dict:
    """``env`` for jobs that keep to the one CPU they ask Slurm for (the long ones:
    the rest of the suite runs beside them). Not for jobs compared with the basic
    launcher's: another thread count sums in another order."""
    return {**env, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


def start_sweep(env, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "run_sweep.py", *suite_defaults(args)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def finish(proc: subprocess.Popen, timeout=600) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def slurm_jobs(env, name: str) -> dict[str, str]:
    """State of each Slurm job whose folder holds ``name``, by job id."""
    out = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%i %T %o"],
                         env=env, capture_output=True, text=True, timeout=60).stdout
    return {line.split()[0]: line.split()[1] for line in out.splitlines() if name in line}


def job_logs(sweep: Path) -> list[str]:
    """What each Slurm job of the sweep folder printed (its stdout and stderr)."""
    return ["".join(p.read_text(errors="replace") for p in sorted(folder.glob("*_log.*")))
            for folder in sorted(sweep.glob(".submitit/*"))
            if re.fullmatch(r"\d+(_\d+)?", folder.name)  # <job> or <array>_<task>
            and any(folder.glob("*_log.*"))]


def wait_for(condition, what: str, timeout: float = 240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(1)
    raise AssertionError(f"waited {timeout:.0f} s for {what}")


def last_checkpoint(job_folder: Path) -> int:
    """The epoch of the job's newest whole checkpoint, one a resume can use (0: none):
    its state file is written after its model."""
    folder = job_folder / "checkpoint"
    return max((int(m[1]) for p in folder.glob("state-*.json")
                if (m := re.fullmatch(r"state-(\d+)\.json", p.name))
                and (folder / f"model-{m[1]}.keras").exists()), default=0)


def running_with_checkpoint(env, sweep_root: Path, job_folder: Path) -> str | None:
    """The Slurm job id of the one job below ``sweep_root`` once it runs and has
    saved a checkpoint (a stop then has an epoch to resume from)."""
    jobs = slurm_jobs(env, str(sweep_root))
    if last_checkpoint(job_folder) and len(jobs) == 1:
        ((job_id, state),) = jobs.items()
        return job_id if state == "RUNNING" else None
    return None


def run_seconds(env, job_id: str) -> int:
    """How long the job has been running, by Slurm's clock."""
    out = subprocess.run(["scontrol", "show", "job", job_id], env=env, capture_output=True,
                         text=True, timeout=60).stdout
    *days, clock = re.search(r"RunTime=(\S+)", out)[1].split("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return ((int(days[0]) if days else 0) * 24 + h) * 3600 + m * 60 + s


def step_pids(env, job_id: str) -> list[int]:
    """The processes of the job's steps: the training, not the batch script."""
    out = subprocess.run(["scontrol", "listpids", job_id], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    rows = [line.split() for line in out.splitlines()[1:]]  # PID JOBID STEPID LOCALID GLOBALID
    pids = [int(row[0]) for row in rows if len(row) >= 3 and row[2].isdigit()]
    assert pids, f"no step processes in scontrol listpids {job_id}: {out}"
    return pids


def meet_the_time_limit(env, sweep_root: Path, job_folder: Path) -> int:
    """Bring the job to its time limit once it has a checkpoint; the epoch of that one.

    It is submitted with a 10-minute limit: submitit counts any signal as a time-out
    then (its margin is 10 minutes). Once it has saved a checkpoint, its training is
    stopped (SIGSTOP: no epoch, no CPU) and its limit lowered to end 35-95 s from
    now (Slurm counts whole minutes). Slurm checks limits every 30 s and signals
    (SIGCONT, then SIGUSR2) at the first check within 20 s + 30 s of the end; it
    ends the job at the first check past the end, at least one check later, so the
    job has 30 s or more to requeue itself. Once the job has said it timed out, the
    limit is raised again before its requeued run can start (``cred_expire``). If
    anything fails on the way, the job is woken and cancelled, not left stopped."""
    job_id = wait_for(lambda: running_with_checkpoint(env, sweep_root, job_folder),
                      "the time-limited job's first checkpoint")
    pids = step_pids(env, job_id)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        checkpoint = last_checkpoint(job_folder)
        minutes = math.ceil((run_seconds(env, job_id) + 35) / 60)
        subprocess.run(["scontrol", "update", f"JobId={job_id}", f"TimeLimit={minutes}"],
                       env=env, check=True, timeout=60)
        wait_for(lambda: "this job is timed-out" in "".join(job_logs(sweep_root / "smoke")),
                 "the time limit's signal", timeout=180)
        subprocess.run(["scontrol", "update", f"JobId={job_id}", "TimeLimit=10"], env=env,
                       check=True, timeout=60)
    except BaseException:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        subprocess.run(["scancel", job_id], env=env, timeout=60)
        raise
    return checkpoint


def in_background(function, *args) -> Callable[[float], object]:
    """Start ``function(*args)`` in a daemon thread (a failed test's exit never waits
    on it); the returned call waits up to its timeout and gives the result, or raises
    what the function raised."""
    outcome = {}

    def run():
        try:
            outcome["result"] = function(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting test
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def result(timeout: float):
        thread.join(timeout)
        assert not thread.is_alive(), f"{function.__name__} still running after {timeout} s"
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"]
    return result


def test_sweeps_through_a_real_slurm(slurm, smoke_sweep, tmp_path):
    basic = records_by_name(smoke_sweep.root)

    # --- side by side: a time-limited job, a job to stop, two sweeps into one folder ---
    limited = tmp_path / "limited"
    chain = ["-m", "seed=0", "spt=false", "lsa=false", "wandb.mode=disabled",
             *smoke_overrides(limited, "trainer.epochs=30"), *SLURM,
             "hydra.launcher.timeout_min=10", "hydra.launcher.signal_delay_s=20"]
    timed = start_sweep(one_thread(slurm), *chain)
    timed_job = limited / "smoke" / "vit-s0_trainer.epochs=30"
    time_limit = in_background(meet_the_time_limit, slurm, limited, timed_job)
    cancelled = tmp_path / "cancelled"
    stop = ["-m", "seed=1", "spt=false", "lsa=false", "wandb.mode=disabled",
            *smoke_overrides(cancelled, "trainer.epochs=30"), *SLURM]
    stopped = start_sweep(one_thread(slurm), *stop)
    shared = tmp_path / "shared"
    twins = [start_sweep(slurm, "-m", "spt=true,false", "lsa=false", "wandb.mode=offline",
                         *smoke_overrides(shared), *SLURM) for _ in range(2)]

    # --- a preemption, then scancel: the sweep stops waiting, reports, exits 1 ---
    victim = cancelled / "smoke" / "vit-s1_trainer.epochs=30"
    victim_id = wait_for(lambda: running_with_checkpoint(slurm, cancelled, victim),
                         "the first checkpoint")
    subprocess.run(["scontrol", "requeue", victim_id], env=slurm, check=True, timeout=60)
    wait_for(lambda: (victim / "run.json").exists()
             and read_record(victim / "run.json")["status"] == "interrupted",
             "the preempted job's record")
    preempted_at = last_checkpoint(victim)
    wait_for(lambda: running_with_checkpoint(slurm, cancelled, victim) and
             last_checkpoint(victim) > preempted_at, "the preempted job's next checkpoint")
    subprocess.run(["scancel", victim_id], env=slurm, check=True, timeout=60)

    # --- the two sweeps into one folder: the basic launcher's records, each trained once ---
    for proc in twins:
        code, out = finish(proc)
        assert code == 0, out[-3000:]
    launched = records_by_name(shared)
    assert set(launched) == {"spt-s0", "vit-s0"}
    for name, (_, record) in launched.items():
        assert comparable(record) == comparable(basic[name][1])
    # four Slurm jobs for two runs: each run trained by exactly one of them, the
    # others found it completed (or running: busy)
    logs = job_logs(shared / "smoke")
    trained = [log for log in logs if ": test top-1 " in log and "skipped" not in log]
    assert len(logs) == 4 and len(trained) == 2

    # --- the stopped job: not waited for, listed with the command that resumes it ---
    code, out = finish(stopped, timeout=300)
    assert code == 1, out[-3000:]
    record = read_record(victim / "run.json")
    assert record["status"] == "interrupted"
    assert "ended without a result (CANCELLED)" in out
    assert (cancelled / "smoke" / "comparison.md").is_file()  # the report of what completed
    lines = out.splitlines()
    head = lines.index("1 run(s) did not finish:")
    assert lines[head + 1].endswith(record["error"])
    resume_epoch = int(re.search(r"resume from epoch (\d+)$", record["error"])[1])
    command = shlex.split(lines[head + 2].removeprefix("  to resume them: "))
    assert command[:4] == ["python", "run_sweep.py", "-m", "seed=1"]

    # --- the printed command resumes the cancelled job ---
    again = subprocess.run([sys.executable, *command[1:]], cwd=ROOT, env=one_thread(slurm),
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    resumed = read_record(victim / "run.json")
    assert resumed["status"] == "completed" and resumed["epochs_completed"] == 30
    # resumed twice: after the preemption, then after scancel
    assert len(resumed["resumed_from_epochs"]) == 2
    assert resumed["resumed_from_epochs"][-1] == resume_epoch
    assert "Bypassing signal SIGTERM" in "".join(job_logs(cancelled / "smoke"))

    # --- the time-limited job: resumed from its checkpoint, completed ---
    checkpoint = time_limit(600)
    code, out = finish(timed)
    assert code == 0, out[-3000:]
    done = read_record(timed_job / "run.json")
    assert done["status"] == "completed" and done["epochs_completed"] == 30
    # resumed once, from the checkpoint it had when stopped (none is written after it)
    assert len(done["resumed_from_epochs"]) == 1 and done["resumed_from_epochs"][0] >= checkpoint
