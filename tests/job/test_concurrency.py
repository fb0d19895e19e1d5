"""Two processes on one job folder: the one holding its lock runs it, the other
skips it with one line naming the holder; a sweep's exit code counts only the
jobs it ran. (A killed holder releases the lock: tests/job/test_resume.py.)"""
import json
import platform
import subprocess
import sys

import pytest
from hydra.core.utils import JobReturn, JobStatus

from hydra_plugins.vit_ablation.outcomes import outcome, summary, tally
from tests.helpers.commands import run_cli, smoke_overrides
from tests.helpers.paths import ROOT
from tests.helpers.records import record

# Holds a job folder's lock, as a running job does, until its stdin closes.
HOLD = ("import sys; from ablation.runs.lock import job_lock\n"
        "with job_lock(sys.argv[1]):\n"
        "    print('held', flush=True); sys.stdin.read()\n")


@pytest.fixture(scope="module")
def contended(tmp_path_factory):
    """A one-job sweep run while another process holds that job's lock."""
    root = tmp_path_factory.mktemp("contended")
    job = root / "smoke" / "vit-s0_trainer.epochs=2"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(job)], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        busy = run_cli("-m", "spt=false", "lsa=false", "wandb.mode=offline",
                       *smoke_overrides(root))
        files = sorted(p.relative_to(job) for p in job.rglob("*"))
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    return {"busy": busy, "files": files, "holder_pid": holder.pid, "root": root}


@pytest.mark.slow
def test_a_job_another_process_runs_is_skipped_naming_the_holder(contended):
    busy = contended["busy"]
    out = busy.stdout + busy.stderr
    assert busy.returncode == 0, out[-3000:]  # it failed nothing: skipping is not failing
    line = next(line for line in out.splitlines() if "is being run by another process" in line)
    assert f"(host {platform.node()}, pid {contended['holder_pid']}, since " in line
    assert "1 job(s) skipped: another process was running them:" in out
    hint = next(line for line in out.splitlines() if "python -m ablation.report" in line)
    assert hint.endswith(str(contended["root"] / "smoke"))  # the command to run once it ends
    assert "Epoch 1" not in out  # never trained
    # nothing of its own in the folder: no record, no W&B run, no checkpoint
    names = {p.parts[0] for p in contended["files"]}
    assert not names & {"run.json", "wandb", "checkpoint"}, contended["files"]
    # no hidden folder of the sweep's own: what the job did came back as its return value
    sweep = contended["root"] / "smoke"
    assert [p.name for p in sweep.iterdir() if p.name.startswith(".") and p.is_dir()] == []


def returned(folder, status=None, detail=None, raised=None):
    """The ``JobReturn`` a launcher hands the sweeper for the job in ``folder``: its
    outcome; a placeholder (no outcome: a job the Slurm wait gave up on); or, with
    ``raised``, a task that raised."""
    ret = JobReturn(overrides=[f"name={folder.name}"], status=JobStatus.COMPLETED)
    if raised is not None:
        ret.status, ret.return_value = JobStatus.FAILED, raised
    else:
        ret.return_value = (outcome(status, str(folder / "run.json"), detail=detail)
                            if status else None)
    return ret


def completed_record(folder, status="completed"):
    """What another sweep's job left in ``folder`` (enough for a reader to see its status)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({
        "schema": 1, "status": status, "switches": {}, "dataset": "digits", "model": "tiny",
        "seed": 0, "config": {}, "error": None if status == "completed" else "elsewhere"}))


def test_exit_code_counts_only_this_sweeps_jobs(tmp_path):
    """The sweep's end is judged from what its own jobs handed back, never from what
    another sweep left in the same folders."""
    ours_failed, ours_ok, busy, died, stopped, raised = (
        tmp_path / n for n in ("a", "b", "c", "d", "e", "f"))
    # this sweep's job failed, then another sweep completed it: still a failure here
    completed_record(ours_failed)
    # this sweep completed its job; another sweep's failed record there is not ours
    completed_record(ours_ok, "failed")
    # stopped on its node (a time limit, scancel): no result; its record says where it resumes
    resumable = {"error": "interrupted by SIGTERM after epoch 2; rerun the same command to "
                          "resume from epoch 3"}
    record(tmp_path, False, False, False, 0, 0.5, status="interrupted", name="e",
           extra=resumable)
    returns = [returned(ours_failed, "failed", "FileNotFoundError: .tmp-model-1.keras"),
               returned(ours_ok, "completed"),
               returned(busy, "busy", f"{busy} is being run by another process (host h, pid 1)"),
               returned(died), returned(stopped),
               returned(raised, raised=RuntimeError("outside the job's own handling"))]
    ended = tally(returns, folder_of=lambda overrides: tmp_path / overrides[0].split("=")[1])
    assert ended.failed == [(ours_failed, "FileNotFoundError: .tmp-model-1.keras"),
                            (raised, "RuntimeError: outside the job's own handling")]
    assert ended.busy == [(busy, f"{busy} is being run by another process (host h, pid 1)")]
    assert ended.unfinished == [(died, "it ended without a result and without a record"),
                                (stopped, resumable["error"])]
    lines = summary(tmp_path, *ended, resume="python run_sweep.py -m seed=0,1")
    assert lines[lines.index("2 run(s) did not finish:") + 3] == (
        "  to resume them: python run_sweep.py -m seed=0,1")
