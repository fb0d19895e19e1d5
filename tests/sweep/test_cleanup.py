"""What a refused command removes (ablation/sweep/cleanup.py): the folders it
created and nothing else, after waiting for a job still being stopped."""
from ablation.runtime.sweep_context import SWEEP_CONTEXT_ENV, SweepContext, publish
from ablation.sweep.cleanup import missing_folders, remove_all_created, remove_created


def test_only_folders_this_command_created_are_removed(tmp_path, monkeypatch):
    monkeypatch.delenv(SWEEP_CONTEXT_ENV, raising=False)
    kept = tmp_path / "results" / "old-sweep" / "vit-s0"
    kept.mkdir(parents=True)
    (kept / "run.json").write_text("{}")
    new_job = tmp_path / "results" / "new-sweep" / "vit-s0"
    other_new = tmp_path / "results" / "new-sweep" / "spt-s0"
    publish(SweepContext(new_folders=missing_folders([tmp_path / "results" / "new-sweep", new_job, other_new, kept])))
    for job in (new_job, other_new):
        (job / ".hydra").mkdir(parents=True)
    (new_job.parent / "multirun.yaml").write_text("x")
    (other_new / "run.json").write_text("{}")   # a job of this sweep that finished
    remove_created(new_job)
    assert not new_job.exists() and other_new.exists() and (kept / "run.json").exists()
    remove_created(other_new)  # now the sweep folder holds only Hydra's bookkeeping
    assert not (tmp_path / "results" / "new-sweep").exists()
    remove_created(kept)       # existed before: never removed
    assert (kept / "run.json").exists()


def test_after_a_refusal_the_command_removes_its_new_folders_but_no_run(tmp_path, monkeypatch):
    """What a launcher's workers left side by side: bookkeeping-only job folders
    go, with the sweep folder once empty; a job that finished keeps its output."""
    import pickle

    from ablation.config import Refused

    monkeypatch.delenv(SWEEP_CONTEXT_ENV, raising=False)
    sweep = tmp_path / "results" / "new-sweep"
    jobs = [sweep / "vit-s0", sweep / "vit-s1"]
    publish(SweepContext(new_folders=missing_folders([sweep, *jobs])))
    for job in jobs:
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "config.yaml").write_text("x")
        (job / "run_sweep.log").write_text("x")
    (sweep / "multirun.yaml").write_text("x")
    remove_all_created()
    assert not (tmp_path / "results").exists()
    publish(SweepContext(new_folders=missing_folders([sweep, *jobs])))
    (jobs[0] / ".hydra").mkdir(parents=True)
    (jobs[1] / "wandb").mkdir(parents=True)
    (jobs[1] / "wandb" / "run.wandb").write_text("x")
    remove_all_created()
    assert not jobs[0].exists() and (jobs[1] / "wandb" / "run.wandb").exists()
    refused = pickle.loads(pickle.dumps(Refused("x=1 is bad")))  # as joblib hands it back
    assert isinstance(refused, SystemExit) and refused.code == 2 and refused.message == "x=1 is bad"


def test_after_a_refusal_a_job_still_being_stopped_is_waited_for(tmp_path, monkeypatch):
    """joblib passes on the first refusal while it kills a sibling job that has
    taken its folder's lock: the command waits for the lock, then removes the
    folder; a lock still held after the wait keeps the folder."""
    import subprocess
    import sys

    from ablation.sweep import cleanup

    monkeypatch.delenv(SWEEP_CONTEXT_ENV, raising=False)
    sweep = tmp_path / "results" / "new-sweep"
    job = sweep / "vit-s0"
    publish(SweepContext(new_folders=missing_folders([sweep, job])))
    (job / ".hydra").mkdir(parents=True)
    (job / "run_sweep.log").write_text("x")

    def hold_lock(seconds):
        holder = subprocess.Popen(
            [sys.executable, "-c", "import sys, time\n"
             "from ablation.runs.lock import job_lock\n"
             "with job_lock(sys.argv[1]):\n    print('held', flush=True)\n"
             "    time.sleep(float(sys.argv[2]))", str(job), str(seconds)],
            stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "held"
        return holder

    holder = hold_lock(60)
    monkeypatch.setattr(cleanup, "LOCK_WAIT_S", 0.3)
    remove_all_created()  # held past the wait: a job may still be running there
    assert (job / ".lock").exists()
    (job / "run.json").write_text("{}")  # a run's output: kept without taking the lock
    written = (job / ".lock").read_bytes()
    monkeypatch.setattr(cleanup, "LOCK_WAIT_S", 30.0)
    remove_all_created()
    assert (job / ".lock").read_bytes() == written and (job / "run.json").exists()
    (job / "run.json").unlink()
    holder.kill()
    holder.wait()
    holder = hold_lock(1.0)  # lets go within the wait
    monkeypatch.setattr(cleanup, "LOCK_WAIT_S", 30.0)
    remove_all_created()
    holder.wait()
    assert not (tmp_path / "results").exists()
