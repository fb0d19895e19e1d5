"""A job folder's lock (ablation/runs/lock.py): exclusive, released with its holder, and
never taken through a link. (Two processes on one job folder: tests/job/test_concurrency.py.)"""
import json
import os

import pytest


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


def test_the_lock_never_follows_a_link(tmp_path):
    from ablation.files import UnsafeFile
    from ablation.runs.lock import job_lock

    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "job").mkdir()
    os.symlink(victim, tmp_path / "job" / ".lock")
    with pytest.raises(UnsafeFile, match="symbolic link"), job_lock(tmp_path / "job"):
        pass
    assert victim.read_text() == "keep me"
