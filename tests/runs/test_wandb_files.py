"""W&B writes inside the job's folder, and a W&B failure never fails a job."""
from __future__ import annotations

from pathlib import Path

import pytest

from ablation.runs.tracking import tracked_run

pytestmark = pytest.mark.slow  # starts W&B's service: tens of seconds on a loaded machine

SETTINGS = {"mode": "offline", "project": "vit-ablation-tests", "group": "g", "tags": []}


def test_wandb_stages_inside_the_job_folder_whatever_the_home_folder(tmp_path, monkeypatch):
    unusable = tmp_path / "a-file"
    unusable.write_text("")  # a home below a file: nothing can be made there
    for name in ("XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(unusable / name.lower()))
    job = tmp_path / "job"
    with tracked_run(SETTINGS, name="vit-s0", config={"tune": None}, tags=[],
                     output_dir=job) as tracker:
        tracker.table("locality/heads", ["head", "distance"], [[0, 1.5]], step=1)
        tracker.summarize({"test/top1": 0.5})
    assert tracker.problems == []
    assert list((job / "wandb" / ".data").rglob("*")), "artifact staging inside the job folder"


def test_a_wandb_failure_is_recorded_and_the_job_goes_on(tmp_path, monkeypatch):
    unusable = tmp_path / "a-file"
    unusable.write_text("")
    monkeypatch.setenv("WANDB_DATA_DIR", str(unusable / "data"))  # the user's choice, unusable
    monkeypatch.setattr("ablation.runs.tracking.USER_WANDB_FOLDERS",
                        frozenset({"WANDB_DATA_DIR"}))
    job = tmp_path / "job"
    with tracked_run(SETTINGS, name="vit-s0", config={"tune": None}, tags=[],
                     output_dir=job) as tracker:
        tracker.table("locality/heads", ["head", "distance"], [[0, 1.5]], step=1)
        tracker.summarize({"test/top1": 0.5})  # what follows still happens
    (problem,) = tracker.problems
    assert problem.startswith("log the table locality/heads: PermissionError: Unable to write "
                              "staging files")
    assert tracker.info()["problems"] == [problem]
    assert not Path(unusable).is_dir()
