"""Rerunning a sweep: completed runs are skipped, a killed run resumes from its
last epoch (its W&B run and its times too), another configuration is refused,
and resume=false starts over."""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from ablation.runs.record import find_records, read_record
from tests.helpers.commands import cli_env, run_cli, smoke_overrides
from tests.helpers.paths import ROOT
from tests.helpers.wandb_runs import wandb_inspect

SWEEP = ["-m", "spt=true,false", "lsa=false", "wandb.mode=offline"]


def sweep_args(tmp_path, epochs):
    return [*SWEEP, *smoke_overrides(tmp_path, f"trainer.epochs={epochs}")]


@pytest.mark.slow
def test_sweep_killed_mid_job_resumes_and_completes_every_run_once(tmp_path, wandb_cli):
    # trainer.verbose=auto: the rerun's output is a pipe, so a progress line per epoch
    args = [*sweep_args(tmp_path, 4), "trainer.verbose=auto"]
    first_job = tmp_path / "smoke" / "spt-s0_trainer.epochs=4"
    state = tmp_path / "smoke" / "vit-s0_trainer.epochs=4" / "checkpoint" / "state.json"
    proc = subprocess.Popen([sys.executable, "run_sweep.py", *args], cwd=ROOT, env=cli_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # wait until the second job is mid-way
        if state.exists() and json.loads(state.read_text())["epoch"] >= 2:
            break
        assert proc.poll() is None, "the sweep ended before it could be killed"
        time.sleep(0.05)
    # the running job holds its folder's lock, and says so
    with open(state.parent.parent / ".lock") as lock:
        with pytest.raises(BlockingIOError):
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert json.loads(lock.read())["pid"] == proc.pid
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_state = json.loads(state.read_text())
    assert 2 <= killed_state["epoch"] < 4
    first_record = (first_job / "run.json").read_text()

    result = run_cli(*args)  # the killed process's lock went with it: no stale-lock step
    out = result.stdout + result.stderr
    assert result.returncode == 0, result.stderr[-3000:]
    assert "spt-s0 already completed here: skipped" in out
    assert "[2/2] vit-s0 epoch 4/4 · " in out and "\r" not in out  # no bar frames in a log
    records = [read_record(p) for p in find_records(tmp_path)]
    assert len(records) == 2 and all(r["status"] == "completed" for r in records)
    assert (first_job / "run.json").read_text() == first_record  # not run again
    vit = next(r for r in records if r["run_name"] == "vit-s0")
    spt = next(r for r in records if r["run_name"] == "spt-s0")
    assert vit["resumed_from_epoch"] == killed_state["epoch"]  # not from epoch 0
    assert [row["epoch"] for row in vit["history"]] == [1, 2, 3, 4]
    assert vit["history"][: killed_state["epoch"]] == killed_state["history"]
    # the optimizer's step, hence the schedule, carried on: same rates as an unbroken run
    assert [row["lr"] for row in vit["history"]] == [row["lr"] for row in spt["history"]]
    assert vit["wandb"]["id"] == killed_state["wandb_id"]  # the same W&B run continued
    assert not state.parent.exists()  # the checkpoint goes once the run is complete

    # Its cost covers the whole training, not the epochs after the resume.
    assert vit["resumed_from_epochs"] == [killed_state["epoch"]]
    assert spt["resumed_from_epochs"] == []
    assert vit["train_seconds"] >= sum(row["epoch_seconds"] for row in vit["history"])
    assert vit["train_seconds"] > killed_state["fit_seconds"] > 0

    # W&B: one run folder to sync, holding every epoch once, in order, as in the record
    job = state.parent.parent
    (run_dir,) = job.glob("wandb/offline-run-*")
    assert run_dir == job / vit["wandb"]["dir"]
    seen = wandb_inspect(wandb_cli, run_dir)
    rows = [r["history"]["item"] for r in seen["history_records"]]
    assert [row["_step"] for row in rows] == [1, 2, 3, 4]
    assert [row["train/loss"] for row in rows] == [row["train/loss"] for row in vit["history"]]
    assert seen["state"] == "finished"
    assert seen["summary"]["test/top1"] == vit["metrics"]["test_top1"]
    (killed_dir,) = job.glob(".replaced/*/wandb/offline-run-*")  # set aside, not synced
    assert killed_dir.name.endswith(vit["wandb"]["id"]) and killed_dir.name != run_dir.name


@pytest.mark.slow
def test_other_configuration_is_refused_and_resume_false_starts_over(tmp_path, smoke_sweep):
    """On a copy of the shared smoke sweep; its spt-s0 and vit-s0 are started over."""
    shutil.copytree(smoke_sweep.root, tmp_path, dirs_exist_ok=True)
    args = [a.replace(str(smoke_sweep.root), str(tmp_path)) for a in smoke_sweep.args]
    args = [a if a != "lsa=true,false" else "lsa=false" for a in args]
    before = {r["run_name"]: r for r in map(read_record, find_records(tmp_path))
              if r["run_name"] in ("spt-s0", "vit-s0")}
    from ablation.files import entries  # every output a job left, as the door lists them

    folders = {read_record(path)["run_name"]: path.parent for path in find_records(tmp_path)}
    outputs = {folders[job]: {p.name for p in entries(folders[job], hidden=False)}
               - {"run_sweep.log"} for job in before}
    assert all({"run.json", "model.keras", "attention_maps.npz"} <= o for o in outputs.values())

    # another preset names no key on the command line: same folders, other config
    other = [a if a != "experiment=smoke" else "experiment=fashion_mnist" for a in args]
    refused = run_cli(*other, "name=smoke")
    out = refused.stdout + refused.stderr
    assert refused.returncode == 2
    assert "holds a run of another configuration (differs in " in out and "dataset.name" in out
    assert "Epoch 1" not in out and "[1/2]" not in out

    fresh = run_cli(*args, "resume=false")
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    after = {r["run_name"]: r for r in map(read_record, find_records(tmp_path))
             if r["run_name"] in ("spt-s0", "vit-s0")}
    assert set(after) == set(before)
    for name in after:
        assert after[name]["wandb"]["id"] != before[name]["wandb"]["id"]  # trained again
    set_aside = list(tmp_path.glob("smoke/*/.replaced/*/run.json"))
    assert len(set_aside) == 2  # kept, and not read by the reporter
    assert len(list(tmp_path.glob("smoke/*/.replaced/*/model.keras"))) == 2  # with its model
    assert {json.loads(p.read_text())["wandb"]["id"] for p in set_aside} == {
        r["wandb"]["id"] for r in before.values()}
    for job, names in outputs.items():  # resume=false sets aside every one of them
        (replaced,) = job.glob(".replaced/*")
        assert names <= {p.name for p in entries(replaced)}, (job, names)
    shutil.rmtree(tmp_path)
