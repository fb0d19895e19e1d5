"""Report generations (ablation/report/generation.py): a report folder holds one
complete generation. Files of an earlier report that this one does not write are set
aside, a report that stops part-way changes nothing, set-aside generations are
bounded; an unwritable folder is one line."""
import json
import shutil
import subprocess
import sys

import pytest

from ablation.report.generation import KEEP_REPLACED, MANIFEST, generation


@pytest.fixture
def sweep(smoke_sweep, tmp_path):
    shutil.copytree(smoke_sweep.root / "smoke", tmp_path / "smoke")
    return tmp_path / "smoke"


@pytest.mark.slow
def test_a_smaller_report_leaves_no_stale_file_and_old_generations_are_bounded(sweep):
    from ablation.report import write_report

    write_report(sweep, make_plots=False, wandb_settings={"mode": "disabled"})
    assert (sweep / "factorial_effects.csv").exists()
    for job in sweep.glob("spt-s0*"):  # one variant fewer: no factorial design any more
        shutil.rmtree(job)
    report = write_report(sweep, make_plots=False, wandb_settings={"mode": "disabled"})
    assert not (sweep / "factorial_effects.csv").exists()
    manifest = json.loads((sweep / MANIFEST).read_text())
    assert sorted(manifest["files"]) == sorted(f.name for f in report.files)
    written = {p.name for p in sweep.iterdir() if p.is_file() and not p.name.startswith(".")}
    assert written == {*manifest["files"], MANIFEST, "multirun.yaml"}
    assert list(sweep.glob(".replaced/report-*/factorial_effects.csv"))  # set aside, not lost
    for _ in range(KEEP_REPLACED + 1):
        write_report(sweep, make_plots=False, wandb_settings={"mode": "disabled"})
    assert len(list(sweep.glob(".replaced/report-*"))) == KEEP_REPLACED


def test_a_report_that_stops_part_way_leaves_the_earlier_generation(tmp_path):
    with generation(tmp_path) as current:
        (current.stage / "comparison.md").write_text("earlier")
        (current.stage / "factorial_effects.csv").write_text("earlier")
    with pytest.raises(RuntimeError), generation(tmp_path) as current:
        (current.stage / "comparison.md").write_text("half of a new one")
        raise RuntimeError("killed while plotting")
    assert (tmp_path / "comparison.md").read_text() == "earlier"
    assert (tmp_path / "factorial_effects.csv").read_text() == "earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "comparison.md", "factorial_effects.csv", MANIFEST]
    (tmp_path / ".report-new-dead").mkdir()  # what a SIGKILL would leave
    with generation(tmp_path) as current:
        (current.stage / "comparison.md").write_text("new")
    assert not list(tmp_path.glob(".report-new-*"))
    assert (tmp_path / "comparison.md").read_text() == "new"
    assert not (tmp_path / "factorial_effects.csv").exists()


def test_files_no_report_wrote_are_never_moved_or_deleted(tmp_path):
    """``--out DIR`` pointed at a folder of the user's figures: a name the report
    would replace stops it in one line, and nothing of the user's moves."""
    from ablation.report.load import ReportError

    (tmp_path / "top1.png").write_bytes(b"the user's figure")
    (tmp_path / "notes.txt").write_text("mine")
    for _ in range(KEEP_REPLACED + 2):
        with pytest.raises(ReportError, match=r"holds top1.png, which no earlier report "
                                               r"there wrote: nothing was replaced"), \
                generation(tmp_path) as current:
            (current.stage / "top1.png").write_bytes(b"a report's figure")
            (current.stage / "comparison.md").write_text("report")
    assert (tmp_path / "top1.png").read_bytes() == b"the user's figure"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "top1.png"]
    with generation(tmp_path) as current:  # no collision: the report writes beside them
        (current.stage / "comparison.md").write_text("report")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_planted_manifest_moves_nothing_a_report_did_not_write(tmp_path):
    (tmp_path / "multirun.yaml").write_text("hydra's")
    (tmp_path / ".report.lock").write_text("")
    (tmp_path / "comparison.md").write_text("a report's")
    (tmp_path / MANIFEST).write_text(json.dumps(
        {"files": ["multirun.yaml", ".report.lock", "../outside.md", "comparison.md", 7]}))
    with generation(tmp_path) as current:
        (current.stage / "comparison.md").write_text("new")
    assert (tmp_path / "multirun.yaml").read_text() == "hydra's"
    assert (tmp_path / ".report.lock").exists()
    (moved,) = tmp_path.glob(".replaced/report-*")
    assert sorted(p.name for p in moved.iterdir()) == ["comparison.md", MANIFEST]


def test_pruning_removes_only_report_generations(tmp_path):
    from ablation.report.generation import prune_replaced

    kept = tmp_path / ".replaced" / "20260101-000000-000000"  # a job's attempt, say
    kept.mkdir(parents=True)
    (kept / "comparison.md").write_text("not a report generation")
    for n in range(KEEP_REPLACED + 2):
        with generation(tmp_path) as current:
            (current.stage / "comparison.md").write_text(str(n))
    prune_replaced(tmp_path)
    assert len(list(tmp_path.glob(".replaced/report-*"))) == KEEP_REPLACED
    assert (kept / "comparison.md").exists()


@pytest.mark.slow
@pytest.mark.parametrize("out, code, says", [
    ("a-file", 2, "is not a folder (or lies below a file)"),
    ("a-file/report", 2, "is not a folder (or lies below a file)"),
    ("/dev/null", 2, "is not a folder (or lies below a file)"),
    ("/proc/self/report", 1, "the report could not be written to /proc/self/report"),
])
def test_a_report_that_cannot_be_written_is_one_line(sweep, tmp_path, out, code, says):
    """--out that names no folder is refused input (2); a folder the system will not
    make is a report that could not be written (1)."""
    (tmp_path / "a-file").write_text("")
    before = sorted(tmp_path.rglob("*"))
    done = subprocess.run([sys.executable, "-m", "ablation.report", str(sweep), "--out",
                           str(tmp_path / out), "--no-plots", "--wandb-mode", "disabled"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == code
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and says in line
    assert sorted(tmp_path.rglob("*")) == before  # nothing made, the sweep's report neither


def test_pruning_never_touches_a_folder_named_like_a_report_by_its_user(tmp_path):
    from ablation.report.generation import prune_replaced

    mine = tmp_path / ".replaced" / "report-2025-paper-final"
    mine.mkdir(parents=True)
    (mine / "top1.png").write_bytes(b"the paper's figure")
    for n in range(KEEP_REPLACED + 2):
        with generation(tmp_path) as current:
            (current.stage / "comparison.md").write_text(str(n))
        prune_replaced(tmp_path)
    assert (mine / "top1.png").read_bytes() == b"the paper's figure"


def test_a_refused_out_folder_is_left_as_it_was_found(tmp_path):
    """``--out`` at a folder of the user's whose names the report would replace: one
    line, and neither a lock file nor a staging folder is left in it."""
    from ablation.report import write_report
    from ablation.report.load import ReportError
    from tests.helpers.records import record

    for spt, lsa in ((False, False), (True, True)):
        record(tmp_path / "sweep", spt, lsa, lsa, 0, 0.5)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "comparison.md").write_text("my notes")
    with pytest.raises(ReportError, match="holds comparison.md"):
        write_report(tmp_path / "sweep", out_dir=out, make_plots=False,
                     wandb_settings={"mode": "disabled"})
    assert sorted(p.name for p in out.iterdir()) == ["comparison.md"]
    assert (out / "comparison.md").read_text() == "my notes"


def test_a_damaged_manifest_in_the_way_is_named(tmp_path):
    """An earlier report whose ``report.json`` no longer parses: the refusal names it,
    not only the files it would have vouched for."""
    (tmp_path / "comparison.md").write_text("an earlier report")
    (tmp_path / MANIFEST).write_text('{"files": ["comparison.md"')
    from ablation.report.load import ReportError

    with pytest.raises(ReportError, match=r"report.json, which lists what an earlier report "
                                          r"wrote, cannot be read \(JSONDecodeError"), \
            generation(tmp_path) as current:
        (current.stage / "comparison.md").write_text("report")
    assert (tmp_path / "comparison.md").read_text() == "an earlier report"


@pytest.mark.parametrize("moves_before_the_kill", [0, 1, 2],
                         ids=["before the new manifest", "before any new file", "after one file"])
def test_a_report_killed_mid_swap_leaves_one_whole_generation_after_recovery(tmp_path,
                                                                           moves_before_the_kill):
    """SIGKILL between setting the earlier generation aside and moving the new one in:
    the next report first restores the earlier one (nothing of the new moved yet) or
    finishes the new one (its manifest in place), never a mix."""
    from ablation.report.generation import recover
    from tests.helpers.paths import ROOT

    with generation(tmp_path) as current:
        (current.stage / "comparison.md").write_text("old")
        (current.stage / "top1.png").write_bytes(b"old")
    child = f"""
import os
from pathlib import Path
import ablation.report.generation as gen
done, real = [0], gen.move
def move(a, b):
    if done[0] == {moves_before_the_kill} - 1:
        os._exit(9)
    done[0] += 1
    return real(a, b)
gen.move = move
real_write = gen.atomic_write
def atomic_write(path, data, **kwargs):
    if path.name == "report.json" and path.parent.name == {tmp_path.name!r} \
            and {moves_before_the_kill} == 0:
        os._exit(9)  # set aside, the new manifest not yet in place
    return real_write(path, data, **kwargs)
gen.atomic_write = atomic_write
with gen.generation(Path({str(tmp_path)!r})) as g:
    (g.stage / "comparison.md").write_text("new")
    (g.stage / "comparison.csv").write_text("new")
"""
    killed = subprocess.run([sys.executable, "-c", child], cwd=ROOT, capture_output=True)
    assert killed.returncode == 9, killed.stderr[-2000:]
    recover(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    shown = {p.name for p in tmp_path.iterdir() if not p.name.startswith(".")} - {MANIFEST}
    assert shown == set(manifest["files"])                      # one generation, whole
    expected = "old" if moves_before_the_kill == 0 else "new"  # its manifest not yet in place
    assert {(tmp_path / n).read_bytes() for n in shown} == {expected.encode()}
    assert not list(tmp_path.glob(".report-new-*"))


def test_a_planted_staging_manifest_moves_or_removes_nothing_outside(tmp_path):
    from ablation.report.generation import recover

    out, victim = tmp_path / "sweep", tmp_path / "victim"
    victim.mkdir()
    stage = out / ".report-new-planted"
    stage.mkdir(parents=True)
    (stage / MANIFEST).write_text(json.dumps({"generation": "/../../../victim",
                                              "files": ["comparison.md"]}))
    recover(out)
    assert victim.is_dir() and not stage.exists()
    assert sorted(p.name for p in out.iterdir()) == []
