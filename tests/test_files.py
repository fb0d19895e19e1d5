"""The one door to the file system (``ablation/files.py``): nothing else in the
package touches a file, and the door follows no link and waits on no FIFO."""
from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path

import pytest

from ablation import files
from ablation.files import UnsafeFile

PACKAGE = Path(__file__).resolve().parents[1] / "ablation"
DOOR = PACKAGE / "files.py"

# Calls that open, write, move, remove or make a file or folder.
BUILTINS = {"open"}
MODULE_CALLS = {
    "os": {"open", "rename", "renames", "replace", "remove", "unlink", "rmdir", "removedirs",
           "makedirs", "mkdir", "mkfifo", "symlink", "link", "truncate", "walk"},
    "shutil": {"rmtree", "move", "copy", "copy2", "copyfile", "copytree"},
    "np": {"load", "save", "savez", "savez_compressed", "fromfile"},
    "numpy": {"load", "save", "savez", "savez_compressed", "fromfile"},
    "pickle": {"load", "loads"},
    "tarfile": {"open"},
}
METHODS = {"write_text", "write_bytes", "read_text", "read_bytes", "unlink", "rename",
           "mkdir", "rmdir", "touch", "symlink_to", "hardlink_to", "savefig", "rglob"}
# Writers that may fill an in-memory buffer (the door then writes its bytes),
# NumPy's reader on a file object the door opened, never unpickling, and an
# archive read from a file object the door opened.
TO_BUFFER = {"savefig", "save", "savez", "savez_compressed"}


def harmless(node: ast.Call, name: str) -> bool:
    first = node.args[0] if node.args else None
    if name in TO_BUFFER:
        return isinstance(first, ast.Name) and first.id.endswith("buffer")
    if name == "open" and not node.args:
        return any(k.arg == "fileobj" for k in node.keywords)
    if name == "load":
        return isinstance(first, ast.Name) and any(
            k.arg == "allow_pickle" and isinstance(k.value, ast.Constant)
            and k.value.value is False for k in node.keywords)
    return False


def file_effects(path: Path) -> list[str]:
    """``line: call`` for every direct file effect in the module at ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in {"savefig", "load", "open", *TO_BUFFER} \
                and harmless(node, f.attr):
            continue
        if isinstance(f, ast.Name) and f.id in BUILTINS:
            found.append(f"{node.lineno}: {f.id}()")
        elif isinstance(f, ast.Attribute):
            owner = f.value.id if isinstance(f.value, ast.Name) else None
            if owner in MODULE_CALLS and f.attr in MODULE_CALLS[owner]:
                found.append(f"{node.lineno}: {owner}.{f.attr}()")
            elif owner not in MODULE_CALLS and f.attr in METHODS:
                found.append(f"{node.lineno}: .{f.attr}()")
    return found


def test_no_module_but_the_door_touches_a_file():
    offenders = {str(p.relative_to(PACKAGE)): calls for p in sorted(PACKAGE.rglob("*.py"))
                 if p != DOOR and (calls := file_effects(p))}
    assert offenders == {}, "file effects outside ablation/files.py: " + repr(offenders)


def test_the_structural_check_sees_each_kind_of_call(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os, shutil, tarfile\nimport numpy as np\n"
                      "open('x')\nos.replace('a', 'b')\nshutil.rmtree('d')\n"
                      "np.load('f')\nPath('p').write_text('t')\nfig.savefig('x.png')\n"
                      "'text'.replace('a', 'b')\nfig.savefig(buffer)\n"
                      "np.load(f, allow_pickle=False)\nnp.load(f)\n"
                      "tarfile.open(fileobj=raw, mode='r|*')\ntarfile.open('x.tar')\n")
    assert [c.split(": ")[1] for c in file_effects(module)] == [
        "open()", "os.replace()", "shutil.rmtree()", "np.load()", ".write_text()",
        ".savefig()", "np.load()", "tarfile.open()"]


# --- the door's policy ----------------------------------------------------------


def test_reading_refuses_links_fifos_and_oversized_files_without_blocking(tmp_path):
    target = tmp_path / "target.json"
    target.write_text("{}")
    (tmp_path / "link.json").symlink_to(target)
    os.mkfifo(tmp_path / "fifo.json")  # opened blocking, this would wait forever
    with pytest.raises(UnsafeFile, match="symbolic link"):
        files.read_bytes(tmp_path / "link.json", 100)
    with pytest.raises(UnsafeFile, match="not a regular file"):
        files.read_bytes(tmp_path / "fifo.json", 100)
    with pytest.raises(UnsafeFile, match="over the 1-byte cap"):
        files.read_bytes(target, 1)
    assert files.read_text(target, 100) == "{}"


def test_writing_never_goes_through_a_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("mine")
    results = tmp_path / "results"
    results.mkdir()
    (results / "run.json").symlink_to(outside / "precious.txt")
    files.atomic_write(results / "run.json", "new")  # the link is replaced, not followed
    assert (outside / "precious.txt").read_text() == "mine"
    assert not (results / "run.json").is_symlink() and (results / "run.json").read_text() == "new"
    (results / "job").symlink_to(outside)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        files.atomic_write(results / "job" / "run.json", "x")
    with pytest.raises(UnsafeFile, match="symbolic link"):
        files.make_folder(results / "job")
    with pytest.raises(UnsafeFile, match="symbolic link"):
        files.save_with(results / "job" / "top1.png", lambda p: Path(p).write_bytes(b"png"))
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]


def test_setting_aside_and_removing_never_follow_a_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").mkdir()
    (outside / "keep" / "data.txt").write_text("mine")
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "comparison.md").write_text("old")
    (folder / ".replaced").symlink_to(outside)  # planted: setting aside would move into it
    with pytest.raises(UnsafeFile, match="symbolic link"):
        files.set_aside([folder / "comparison.md"], files.replaced_folder(folder))
    assert (folder / "comparison.md").read_text() == "old"
    (folder / "linked").symlink_to(outside / "keep")
    assert files.remove_tree(folder / "linked") is False  # a link: not ours to remove
    inner = folder / "inner"
    inner.mkdir()
    (inner / "to-keep").symlink_to(outside / "keep")
    assert files.remove_tree(inner) is True
    assert (outside / "keep" / "data.txt").read_text() == "mine"
    assert files.entries(folder, "*.md") == [folder / "comparison.md"]
    assert files.entries(folder / "linked") == []  # never listed through a link


def test_the_lock_file_is_never_a_link_or_a_fifo(tmp_path):
    (tmp_path / "elsewhere").write_text("x")
    (tmp_path / ".lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeFile, match="symbolic link"):
        files.open_lock(tmp_path / ".lock")
    os.mkfifo(tmp_path / ".report.lock")
    with pytest.raises(UnsafeFile, match="not a regular file"):
        files.open_lock(tmp_path / ".report.lock")
    assert (tmp_path / "elsewhere").read_text() == "x"


def test_a_fifo_where_the_suite_writes_is_refused_before_anything_opens_it(tmp_path):
    """Hydra opens run_sweep.log, .hydra/config.yaml and multirun.yaml for writing:
    a FIFO there would block forever, so the check before any job refuses it."""
    from ablation.config import ConfigError
    from ablation.sweep.preflight import check_paths

    job = {"results_dir": str(tmp_path / "results")}
    folder = tmp_path / "results" / "sweep" / "vit-s0"
    (folder / ".hydra").mkdir(parents=True)
    for name in ("run_sweep.log", ".hydra/config.yaml", "wandb/.cache", "../multirun.yaml"):
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
        with pytest.raises(ConfigError, match="is a FIFO \\(named pipe\\) where the suite keeps"):
            check_paths(job, folder)
        path.unlink()
    (folder / "wandb" / ".data").symlink_to(tmp_path)  # W&B would stage through it
    with pytest.raises(ConfigError, match="symbolic link"):
        check_paths(job, folder)


@pytest.mark.parametrize("where, names", [("job", "JOB_FILES"), ("sweep", "sweep_files")])
def test_the_wrong_kind_of_entry_at_any_name_the_suite_keeps_is_one_line(tmp_path, where,
                                                                        names):
    """A folder where the suite writes a file, or a file where it keeps a folder, at
    every name of the door's lists and as the job or sweep folder itself: refused in
    one line before the job, nothing created."""
    from ablation.config import ConfigError
    from ablation.sweep import preflight

    job = {"results_dir": str(tmp_path / "results")}
    folder = tmp_path / "results" / "sweep" / "vit-s0"
    base = folder if where == "job" else folder.parent
    listed = getattr(preflight, names)
    for name in ["", *(listed() if callable(listed) else listed)]:
        if not name:  # the job's or sweep's folder itself, as a file
            base.parent.mkdir(parents=True, exist_ok=True)
            base.write_text("")
            wrong = "a file where the suite keeps its own folder"
        else:
            folder.mkdir(parents=True, exist_ok=True)
            path = base / name.rstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            if name.endswith("/"):
                path.write_text("")
                wrong = "a file where the suite keeps its own folder"
            else:
                path.mkdir()
                wrong = "a folder where the suite keeps its own file"
        before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
        with pytest.raises(ConfigError, match=wrong) as caught:
            preflight.check_paths(job, folder)
        assert "\n" not in str(caught.value) and str(base / name.rstrip("/")) in str(caught.value)
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
        shutil.rmtree(tmp_path / "results")


def test_a_read_only_sweep_folder_in_a_writable_results_folder_is_one_line(tmp_path):
    from ablation.config import ConfigError
    from ablation.sweep.preflight import check_paths

    folder = tmp_path / "results" / "sweep" / "vit-s0"
    folder.parent.mkdir(parents=True)
    folder.parent.chmod(0o555)
    try:
        if os.access(folder.parent, os.W_OK):
            pytest.skip("this user writes into read-only folders (root)")
        with pytest.raises(ConfigError, match="sweep cannot be written"):
            check_paths({"results_dir": str(tmp_path / "results")}, folder)
    finally:
        folder.parent.chmod(0o755)


def test_a_record_with_a_5000_digit_number_is_skipped_not_a_traceback(tmp_path):
    from ablation.runs.record import RecordError, read_record

    (tmp_path / "run.json").write_text('{"status": ' + "1" * 5000 + "}")
    with pytest.raises(RecordError):
        read_record(tmp_path / "run.json")


def test_a_finished_job_removes_only_the_checkpoint_files_it_wrote(tmp_path):
    from ablation.train.checkpoint import remove

    folder = tmp_path / "checkpoint"
    folder.mkdir()
    for name in ("model-2.keras", "model-3.keras", "state-3.json", "state.json",
                 ".model-4.keras.abc123.keras", "my_notes.txt"):
        (folder / name).write_text("x")
    remove(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["my_notes.txt"]
    (folder / "my_notes.txt").unlink()
    remove(folder)
    assert not folder.exists()
