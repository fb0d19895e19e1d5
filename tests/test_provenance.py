"""Every record says which code, libraries, backend and device made it; the
backend and the data are part of a run's identity; the report says which
code its numbers came from."""
import json
import shutil
import subprocess
from importlib.metadata import version

import keras
import numpy as np
import pytest
from conftest import ROOT, run_cli, wandb_inspect

import ablation
from ablation.config.folders import folder_suffix
from ablation.runs.record import find_records, read_record
from ablation.runs.schema import validate_record
from ablation.runtime import provenance
from ablation.runtime.provenance import code_history, code_state, describe_code, environment


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
    assert describe_code({"version": "1.2", "commit": "abcdef0123", "dirty": True}) \
        == "1.2 @ abcdef0+changes"
    assert describe_code(None) == "(version not recorded)"


def test_another_backend_names_its_own_folder(monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    assert folder_suffix("") == "" and folder_suffix("trainer.epochs=3") == "_trainer.epochs=3"
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert folder_suffix("") == "_backend=jax"
    assert folder_suffix("trainer.epochs=3") == "_trainer.epochs=3,backend=jax"
    monkeypatch.setenv("KERAS_BACKEND", "../elsewhere")  # refused by preflight; never a path
    assert folder_suffix("") == ""


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
