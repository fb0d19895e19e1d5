"""Every record says which code, libraries, backend and device made it; the
backend and the data are part of a run's identity; the report says which
code its numbers came from."""
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version

import keras
import numpy as np
import pytest
from tests.helpers.commands import run_cli
from tests.helpers.paths import ROOT
from tests.helpers.wandb_runs import wandb_inspect

import ablation
from ablation.config.folders import folder_suffix
from ablation.runs.record import find_records, read_record
from ablation.runs.record_schema import validate_record
from ablation.runtime import provenance
from ablation.runtime.provenance import (UNKNOWN_CODE, code_history, code_state, describe_code,
                                         environment)


def git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_version_is_written_once():
    assert version("vit-ablation") == ablation.__version__
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ablation.__version__"}


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout")
def test_the_code_state_is_the_checkouts():
    state = code_state()
    assert state["version"] == ablation.__version__
    assert state["commit"] == git("rev-parse", "HEAD")
    changed = git("status", "--porcelain", "--", *provenance.CODE_PATHS)
    assert state["dirty"] is bool(changed)


def test_outside_a_checkout_the_commit_is_unknown(tmp_path, monkeypatch):
    fake = tmp_path / "site-packages" / "ablation"
    fake.mkdir(parents=True)
    monkeypatch.setattr(provenance.ablation, "__file__", str(fake / "__init__.py"))
    provenance.code_state.cache_clear()
    try:
        assert code_state() == {"version": ablation.__version__, "commit": None, "dirty": None}
    finally:
        monkeypatch.undo()
        provenance.code_state.cache_clear()


def test_the_environment_names_the_libraries_and_the_device():
    env = environment()
    assert env["backend"] == keras.backend.backend()
    assert env["backend_version"] == __import__(env["backend"]).__version__
    assert env["keras"] == keras.__version__ and env["numpy"] == np.__version__
    assert env["code"] == code_state()
    assert set(env["device"]) == {"cpu", "gpu", "gpu_count", "driver", "cuda", "cudnn"}
    assert env["device"]["cpu"]                         # /proc/cpuinfo's model name
    env["code"]["version"] = "changed"                  # a copy: the next record is unharmed
    assert environment()["code"]["version"] == ablation.__version__


def test_code_history_adds_an_attempt_only_when_the_code_changed():
    now = code_state()
    assert code_history(None) == [now]
    assert code_history([now]) == [now]
    older = {**now, "commit": "0" * 40}
    assert code_history([older]) == [older, now]
    # a checkpoint from before code was recorded: its attempt's code is unknown
    assert code_history([UNKNOWN_CODE]) == [UNKNOWN_CODE, now]
    assert describe_code({"version": "1.2", "commit": "abcdef0123", "dirty": True}) \
        == "1.2 @ abcdef0+changes"
    assert describe_code(None) == "(version not recorded)"


SUFFIXES = """
import json, sys
from ablation.config.folders import folder_suffix
print(json.dumps([folder_suffix(""), folder_suffix("trainer.epochs=3"), "keras" in sys.modules]))
"""


@pytest.mark.parametrize("backend, plain, named", [
    ("tensorflow", "", "_trainer.epochs=3"),
    ("jax", "_backend=jax", "_trainer.epochs=3,backend=jax"),
    ("../elsewhere", "", "_trainer.epochs=3"),        # refused by preflight; never a path
])
def test_another_backend_names_its_own_folder(backend, plain, named):
    done = subprocess.run([sys.executable, "-c", SUFFIXES], capture_output=True, text=True,
                          env={**os.environ, "KERAS_BACKEND": backend}, cwd=ROOT, check=True)
    assert json.loads(done.stdout) == [plain, named, False]   # read without loading Keras


def test_a_loaded_keras_names_its_own_backend(monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "jax")          # what a new process would load
    expected = "" if keras.backend.backend() == "tensorflow" else f"_backend={keras.backend.backend()}"
    assert folder_suffix("") == expected


@pytest.mark.slow
def test_the_report_splits_backends_and_says_which_code(smoke_sweep, tmp_path):
    from ablation.report import write_report
    from ablation.report.load import load_runs

    root = tmp_path / "sweep"
    shutil.copytree(smoke_sweep.root, root)
    paths = find_records(root)
    records = [read_record(p) for p in paths]
    for record in records:                               # every record says its code
        validate_record(record)
        assert record["environment"]["code"] == code_state()
        assert record["code_history"] == [code_state()]
    runs = load_runs(root)
    assert set(runs["setting"]) == {""}                  # one backend, one block
    text = write_report(root, make_plots=False).markdown
    assert f"Code: vit-ablation {describe_code(code_state())}, tensorflow" in text
    assert "MIXED CODE" not in text

    # the same runs made on JAX (their records relabelled) are another block
    for path, record in zip(paths, records):
        copy = path.parent.with_name(path.parent.name + "_backend=jax")
        copy.mkdir()
        jax_run = {**record, "environment": {**record["environment"], "backend": "jax"}}
        (copy / "run.json").write_text(json.dumps(jax_run))
    runs = load_runs(root)
    assert sorted(set(runs["setting"])) == ["backend=jax", "backend=tensorflow"]
    assert (runs.groupby("setting").size() == len(records)).all()   # nothing dropped
    for path in find_records(root):
        if "backend=jax" in path.parent.name:
            path.parent.joinpath("run.json").unlink()

    # a run without a recorded fingerprint (older, or failed) joins the one data known;
    # runs on two different data are two blocks
    first, second = (read_record(p) for p in paths[:2])
    assert first["data"]["fingerprint"].startswith("sha256:")
    first["data"].pop("fingerprint")
    paths[0].write_text(json.dumps(first))
    assert set(load_runs(root)["setting"]) == {""}
    second["data"]["fingerprint"] = "sha256:" + "9" * 64
    paths[1].write_text(json.dumps(second))
    runs = load_runs(root).set_index("path")
    assert runs.loc[str(paths[0]), "setting"] == "data=unrecorded"
    assert runs.loc[str(paths[1]), "setting"] == "data=sha256:999999999999"
    assert runs["setting"].str.startswith("data=sha256:").sum() == len(paths) - 1

    # one run of a block from other code: the caption says so plainly
    shutil.rmtree(root)
    shutil.copytree(smoke_sweep.root, root)
    path = find_records(root)[0]
    record = read_record(path)
    record["environment"]["code"] = {**record["environment"]["code"], "commit": "f" * 40}
    path.write_text(json.dumps(record))
    text = write_report(root, make_plots=False).markdown
    assert "MIXED CODE: the runs of this block came from 2 versions" in text
    assert "@ fffffff" in text
    # on request, each code is a block of its own, labelled by it
    runs = load_runs(root, split_by_code=True)
    assert runs["setting"].str.contains("@ fffffff").sum() == 1
    assert runs["setting"].nunique() == 2


@pytest.mark.slow
def test_a_jax_job_beside_the_tensorflow_run_is_its_own_job(smoke_sweep, tmp_path, wandb_cli):
    pytest.importorskip("jax", reason="the test extra installs jax")
    results = tmp_path / "results"
    shutil.copytree(smoke_sweep.root, results)
    tensorflow_run = next(p for p in find_records(results) if p.parent.name.startswith("vit-s0"))
    before = tensorflow_run.read_bytes()
    root = tensorflow_run.parent.parent
    args = [a for a in smoke_sweep.args if a not in ("-m", "spt=true,false", "lsa=true,false")
            and not a.startswith("results_dir=")]
    done = run_cli(*args, "spt=false", "lsa=false", f"results_dir={results}",
                   f"name={root.name}", "report.after_sweep=false", "estimate=false",
                   env={"KERAS_BACKEND": "jax"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "already completed" not in done.stdout + done.stderr
    assert tensorflow_run.read_bytes() == before          # the TensorFlow run is untouched
    job = root / f"{tensorflow_run.parent.name},backend=jax"   # vit-s0_trainer.epochs=2,...
    record = read_record(job / "run.json")
    assert record["status"] == "completed"
    env = record["environment"]
    assert env["backend"] == "jax" and env["backend_version"] == version("jax")
    assert env["code"]["version"] == ablation.__version__
    (run_dir,) = (job / "wandb").glob("offline-run-*")
    config = wandb_inspect(wandb_cli, run_dir)["config"]
    assert config["environment"]["backend"] == "jax"
    assert config["environment"]["code"]["commit"] == env["code"]["commit"]
