"""Two processes on one job folder: the one holding its lock runs it, the other
skips it with one line naming the holder; a sweep's exit code counts only the
jobs it ran. (A killed holder releases the lock: tests/test_resume.py.)"""
import json
import os
import platform
import subprocess
import sys

import pytest

from ablation.sweep import outcomes
from ablation.runtime.sweep_context import SWEEP_CONTEXT_ENV, SweepContext, publish
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
    assert not (contended["root"] / "smoke" / outcomes.SWEEPS_DIR).exists()  # cleaned up


def outcome_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(SWEEP_CONTEXT_ENV, raising=False)  # restored after the test
    folder = outcomes.start(tmp_path)
    publish(SweepContext(outcomes=str(folder)))
    return folder


def completed_record(folder, status="completed"):
    """What another sweep's job left in ``folder`` (enough for a reader to see its status)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({
        "schema": 1, "status": status, "switches": {}, "dataset": "digits", "model": "tiny",
        "seed": 0, "config": {}, "error": None if status == "completed" else "elsewhere"}))


def test_exit_code_counts_only_this_sweeps_jobs(tmp_path, monkeypatch):
    ours_failed, ours_ok, busy, died, stopped, lost = (
        tmp_path / n for n in ("a", "b", "c", "d", "e", "f"))
    folder = outcome_folder(tmp_path, monkeypatch)
    # this sweep's job failed, then another sweep completed it: still a failure here
    outcomes.report(ours_failed, "failed", "FileNotFoundError: .tmp-model-1.keras")
    completed_record(ours_failed)
    # this sweep completed its job; another sweep's failed record there is not ours
    outcomes.report(ours_ok, "completed")
    completed_record(ours_ok, "failed")
    outcomes.report(busy, "busy", f"{busy} is being run by another process (host h, pid 1)")
    # stopped in its worker (a time limit, scancel): its record says where it resumes
    outcomes.report(stopped, "interrupted", "SIGTERM")
    resumable = {"error": "interrupted by SIGTERM after epoch 2; rerun the same command to "
                          "resume from epoch 3"}
    record(tmp_path, False, False, False, 0, 0.5, status="interrupted", name="e",
           extra=resumable)
    # a node lost after an earlier stop: no outcome, an interrupted record
    record(tmp_path, False, False, False, 0, 0.5, status="interrupted", name="f",
           extra=resumable)
    ended = outcomes.tally(tmp_path, [ours_failed, ours_ok, busy, died, stopped, lost], folder)
    assert ended.failed == [(ours_failed, "FileNotFoundError: .tmp-model-1.keras"),
                            (died, "the job left neither an outcome nor a record")]
    assert ended.busy == [(busy, f"{busy} is being run by another process (host h, pid 1)")]
    assert ended.unfinished == [(stopped, resumable["error"]), (lost, resumable["error"])]
    lines = outcomes.summary(tmp_path, *ended, resume="python run_sweep.py -m seed=0,1")
    assert lines[lines.index("2 run(s) did not finish:") + 3] == (
        "  to resume them: python run_sweep.py -m seed=0,1")
    assert not folder.exists() and not (tmp_path / outcomes.SWEEPS_DIR).exists()


def test_lock_is_exclusive_and_released_with_its_holder(tmp_path):
    from ablation.runs.lock import JobBusy, job_lock

    with job_lock(tmp_path) as me:
        with pytest.raises(JobBusy) as busy:
            with job_lock(tmp_path):
                pass
        assert busy.value.holder == me
        assert json.loads((tmp_path / ".lock").read_text()) == me
    with job_lock(tmp_path):  # free again
        pass


def test_outcome_folders_of_killed_sweeps_are_removed_live_ones_kept(tmp_path, monkeypatch):
    """A sweep killed with -9 leaves its outcome folder; the next sweep's start
    removes it, never one whose process lives or one from another host."""
    monkeypatch.delenv(SWEEP_CONTEXT_ENV, raising=False)  # restored after the test
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    host = outcomes._host()
    sweeps = tmp_path / outcomes.SWEEPS_DIR
    names = {"dead": f"20260101-000000-{host}-{dead}-0123abcd",
             "live": f"20260101-000000-{host}-1-0123abcd",            # pid 1 always lives
             "other host": f"20260101-000000-elsewhere-{dead}-0123abcd",
             "not ours": "notes"}
    for name in names.values():
        (sweeps / name).mkdir(parents=True)
        (sweeps / name / "x.json").write_text("{}")
    folder = outcomes.start(tmp_path)
    left = sorted(p.name for p in sweeps.iterdir())
    assert left == sorted(v for k, v in names.items() if k != "dead")
    assert outcomes._NAME.match(folder.name)["pid"] == str(os.getpid())
