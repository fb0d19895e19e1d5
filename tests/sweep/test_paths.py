"""Where a sweep writes (ablation/sweep/preflight.py, ``check_paths``): nothing outside
results_dir, no link followed. A link planted where the suite writes is refused in one
line before anything is written (even when every job would be skipped), and an unsafe
results_dir is refused."""
import os
import shutil

import pytest

from tests.helpers.commands import run_in_process

PLACES = [".lock", "run.json", "run_sweep.log", ".hydra/config.yaml", "checkpoint",
          "wandb"]


@pytest.fixture
def sweep_copy(smoke_sweep, tmp_path):
    """A copy of the shared smoke sweep, its args pointing at the copy."""
    shutil.copytree(smoke_sweep.root, tmp_path / "results")
    args = [a.replace(str(smoke_sweep.root), str(tmp_path / "results")) for a in smoke_sweep.args]
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    return tmp_path / "results", args, victim


def _one_line_refusal(result):
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("place", PLACES)
def test_a_link_where_a_job_writes_is_refused_and_not_followed(sweep_copy, place):
    root, args, victim = sweep_copy
    job = next(p for p in (root / "smoke").iterdir() if p.name.startswith("spt+lsa+temp"))
    target = job / place
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    os.symlink(victim, target)
    before = sorted(str(p) for p in root.rglob("*"))
    line = _one_line_refusal(run_in_process(*args))
    assert "symbolic link" in line and place.split("/")[-1] in line
    assert victim.read_text() == "keep me"
    assert sorted(str(p) for p in root.rglob("*")) == before  # nothing written


@pytest.mark.slow
def test_a_job_folder_that_is_a_link_is_refused(sweep_copy, tmp_path):
    root, args, victim = sweep_copy
    job = next(p for p in (root / "smoke").iterdir() if p.name.startswith("vit-s0"))
    elsewhere = tmp_path / "elsewhere"
    shutil.move(job, elsewhere)
    os.symlink(elsewhere, job)
    line = _one_line_refusal(run_in_process(*args))
    assert "outside results_dir" in line or "symbolic link" in line
    assert not (elsewhere / ".hydra" / "overrides.yaml").read_text().count("resume=false")


@pytest.mark.slow
def test_a_link_at_the_sweeps_report_lock_is_refused(sweep_copy):
    root, args, victim = sweep_copy
    (root / "smoke" / ".report.lock").unlink(missing_ok=True)
    os.symlink(victim, root / "smoke" / ".report.lock")
    line = _one_line_refusal(run_in_process(*args))
    assert ".report.lock is a symbolic link" in line
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize("results_dir, says", [
    ("", "results_dir is empty"),
    ("/", "is the file system's root"),
    ("/proc/vit-ablation-results", "cannot be created"),
])
def test_an_unsafe_results_dir_is_refused(results_dir, says):
    result = run_in_process("experiment=smoke", f"results_dir={results_dir}",
                            "wandb.mode=disabled")
    assert says in _one_line_refusal(result)
    assert not os.path.exists("/smoke")


def test_hydras_own_sweep_folder_is_honoured_with_the_same_safety(tmp_path):
    """``hydra.sweep.dir`` outside ``results_dir`` (a common Hydra habit): the jobs
    run there, and a link planted there is refused as it is below results_dir."""
    from ablation.config import ConfigError
    from ablation.sweep.preflight import check_paths

    job = {"results_dir": str(tmp_path / "results")}
    folder = tmp_path / "outputs" / "2026-11-25" / "vit-s0"
    check_paths(job, folder)  # not refused: nothing exists yet
    folder.mkdir(parents=True)
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    os.symlink(victim, folder / "run.json")
    with pytest.raises(ConfigError, match="run.json is a symbolic link"):
        check_paths(job, folder)
    os.symlink(victim, folder.parent / "multirun.yaml")
    (folder / "run.json").unlink()
    with pytest.raises(ConfigError, match="multirun.yaml is a symbolic link"):
        check_paths(job, folder)
