"""Secrets, folder names, refusals and native log lines: the command line's guards.

One command-line sweep carries secret values in every quoting style Hydra
accepts; each token must be absent from the whole results tree (records,
Hydra's saved files, logs, W&B files, folder names) and from the terminal.
The rest are in-process checks of the pieces the refusals are made of.
"""
import logging
import os

import pytest

from ablation.config import ConfigError, check_folder_name, folder_suffix, redact, scrub_text
from ablation.config.folders import split_overrides
from ablation.data import DataError
from ablation.data.datasets import _download
from ablation.data.formats import read_cifar
from ablation.runtime.native_log import quiet_native_stderr
from ablation.runtime.sweep_context import SWEEP_CONTEXT_ENV, SweepContext, publish
from ablation.sweep.cleanup import missing_folders, remove_all_created, remove_created
from ablation.config import redact_argv
from ablation.config.compose import check_group_options
from tests.helpers.commands import run_cli
from tests.helpers.paths import ROOT

# Each value has two tokens; each must vanish, not only the first.
SECRET_ARGS = {
    "+wandb.api_key='SECRETAAA SECRETBBB'": ("SECRETAAA", "SECRETBBB"),     # single quotes
    '+trainer.token="TOK111,TOK222"': ("TOK111", "TOK222"),                # double quotes, comma
    r"+report.password=PWQ111\ PWQ222": ("PWQ111", "PWQ222"),               # escaped space
    "+gpu.secret=KEYE111=KEYE222 KEYE333": ("KEYE111", "KEYE222", "KEYE333"),  # '=' and space
    "+wandb.credentials='QQ111\\'QQ222'": ("QQ111", "QQ222"),             # escaped quote
    "+trainer.extra={token:'DDD111 DDD222'}": ("DDD111", "DDD222"),       # inside a dict value
    "+wandb.api_key_b64=KKK1": ("KKK1",),                                  # the word, then more
    "+x.passphrase=KKK4": ("KKK4",),
    # credentials inside the values of keys that do not look secret
    "+wandb.link='see https://alice:URLPW111@example.com/x'": ("URLPW111",),
    "+report.note='login with token=EMB111 EMB222'": ("EMB111", "EMB222"),
}
# A config file of the user's (--config-dir): a PEM block under a secret-named
# key, and credentials inside values of keys that do not look secret.
SITE_CONFIG = """# @package _global_
wandb:
  private_key: |
    -----BEGIN PRIVATE KEY-----
    PEMLINE111
    PEMLINE222
    -----END PRIVATE KEY-----
  server: https://bob:FILEPW111@wandb.example.com/api
  notes: connect with password=FILEPW222 please
"""
FILE_TOKENS = ["PEMLINE111", "PEMLINE222", "FILEPW111", "FILEPW222"]
TOKENS = [t for tokens in SECRET_ARGS.values() for t in tokens]


@pytest.mark.slow
def test_secret_values_are_hidden_whole_everywhere_and_no_native_log_lines(tmp_path):
    out = tmp_path / "results"
    (tmp_path / "site_conf" / "site").mkdir(parents=True)
    (tmp_path / "site_conf" / "site" / "creds.yaml").write_text(SITE_CONFIG)
    result = run_cli("-m", f"--config-dir={tmp_path / 'site_conf'}", "experiment=smoke",
                     f"results_dir={out}", "trainer.epochs=1", "dataset.limit_train=256",
                     "dataset.limit_test=64", "trainer.verbose=0", "wandb.mode=offline",
                     "report.after_sweep=false", "+site=creds", *SECRET_ARGS,
                     fresh=True)  # what TensorFlow prints while it loads is checked
    terminal = result.stdout + result.stderr
    assert result.returncode == 0, terminal[-3000:]
    assert "#0 : " in terminal  # Hydra's job line, which echoes the overrides
    files = [p for p in out.rglob("*")]
    assert any(p.name == "run.json" for p in files) and any(p.suffix == ".wandb" for p in files)
    assert any(p.name == "multirun.yaml" for p in files)
    assert any(p.parent.name == ".hydra" and p.name == "config.yaml" for p in files)
    record = next(p for p in files if p.name == "run.json").read_text()
    assert "wandb.example.com" in record and "***redacted***" in record  # masked, not dropped
    for token in TOKENS + FILE_TOKENS:
        assert token not in terminal, token
        for path in files:
            assert token not in str(path), path
            if path.is_file():
                assert token.encode() not in path.read_bytes(), (token, path)
    # TensorFlow's C++ start-up lines stay out unless VIT_ABLATION_DEBUG asks for them
    assert "cudart_stub" not in terminal and "cuInit" not in terminal
    assert "absl::InitializeLog" not in terminal


@pytest.mark.parametrize("arg", SECRET_ARGS)
def test_argv_redaction_replaces_the_whole_value(arg):
    (redacted,) = redact_argv([arg])
    assert redacted == arg.split("=", 1)[0] + "='***redacted***'"
    assert redact_argv(["-m", "seed=0,1", "model.pooling=class_token", "+x.notes={a: 1}"]) == [
        "-m", "seed=0,1", "model.pooling=class_token", "+x.notes={a: 1}"]


@pytest.mark.parametrize("arg", [
    "+aws.private_key=KKK3", "+hf.tokens=KKK5", "+a.b=[1,{c:{Auth_Header:KKK6}}]",
    "+x.MyApiKey=KKK7", "+x='{\"secrets\": \"KKK8\"}'"])
def test_secret_words_anywhere_in_the_last_component_or_nested(arg):
    (redacted,) = redact_argv([arg])
    assert "KKK" not in redacted and redacted.endswith("='***redacted***'")
    assert folder_suffix(f"{arg},trainer.epochs=2") == "_trainer.epochs=2"
    assert folder_suffix("+trainer.extra='***redacted***',trainer.epochs=3") == "_trainer.epochs=3"


def test_no_key_of_the_projects_config_looks_secret():
    """Every key Hydra composes, with every option of every group, hydra's own
    included: the pattern must not hide a real setting."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from ablation.config import is_secret_key

    def keys(node, prefix=""):
        for key, value in node.items():
            yield f"{prefix}{key}"
            if isinstance(value, dict):
                yield from keys(value, f"{prefix}{key}.")
    seen = set()
    for path in (ROOT / "conf").rglob("*.yaml"):   # every option of every group, as written
        seen |= set(keys(OmegaConf.to_container(OmegaConf.load(path)), f"{path.parent.name}."))
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):  # and Hydra's own
        seen |= set(keys(OmegaConf.to_container(
            compose("config", ["hydra/launcher=joblib"], return_hydra_config=True))))
    assert {"trainer.epochs", "model.pooling", "hydra.job.name", "hydra.launcher.n_jobs"} <= seen
    assert [k for k in seen if is_secret_key(k)] == []


@pytest.mark.parametrize("text", [
    "- +wandb.api_key=SECRETAAA SECRETBBB", "api_key: 'SECRETAAA, SECRETBBB'",
    'token: "SECRETAAA \\" SECRETBBB"', "override_dirname: +trainer.token=SECRETAAA,SECRETBBB",
    "password=SECRETAAA=SECRETBBB"])
def test_saved_files_lose_the_whole_value(text):
    scrubbed = scrub_text(f"seed: 0\n{text}\nlsa: true\n")
    assert "SECRETAAA" not in scrubbed and "SECRETBBB" not in scrubbed
    assert scrubbed.startswith("seed: 0\n") and scrubbed.endswith("\nlsa: true\n")
    assert redact({"wandb": {"api_key": "A B"}}) == {"wandb": {"api_key": "***redacted***"}}


PEM = "-----BEGIN PRIVATE KEY-----\nPEMLINE111\nPEMLINE222\n-----END PRIVATE KEY-----\n"


@pytest.mark.parametrize("style", ["as Hydra saves it", "block", "double-quoted", "plain"])
def test_a_multi_line_secret_is_hidden_on_every_line(style):
    from omegaconf import OmegaConf

    saved = OmegaConf.to_yaml(OmegaConf.create({"site": {"private_key": PEM, "port": 1}}))
    text = {"as Hydra saves it": saved,
            "block": "site:\n  private_key: |-\n    PEMLINE111\n\n    PEMLINE222\n  port: 1\n",
            "double-quoted": 'site:\n  private_key: "PEMLINE111\\n\n    PEMLINE222"\n  port: 1\n',
            "plain": "site:\n  private_key: PEMLINE111\n    PEMLINE222\n  port: 1\n"}[style]
    scrubbed = scrub_text(f"seed: 0\n{text}lsa: true\n")
    assert "PEMLINE111" not in scrubbed and "PEMLINE222" not in scrubbed, scrubbed
    assert scrubbed.startswith("seed: 0\nsite:\n  private_key: ***redacted***\n")
    assert scrubbed.endswith("  port: 1\nlsa: true\n")
    assert redact({"site": {"private_key": PEM}}) == {"site": {"private_key": "***redacted***"}}


@pytest.mark.parametrize("value, kept", [
    ("https://alice:PW111@example.com/x", "https://***redacted***@example.com/x"),
    ("s3://KEY111:PW111@bucket/data", "s3://***redacted***@bucket/data"),
    ("a user@host with https://odd@pw:PW111@h.org", "https://***redacted***@h.org"),
    ("connect with token=PW111 please", "connect with token=***redacted***"),
    ("dsn: host=db password: PW111", "host=db password: ***redacted***"),
    ("https://h.org/x?api_key=PW111&page=2", "https://h.org/x?api_key=***redacted***"),
])
def test_credentials_inside_any_value_are_masked(value, kept):
    redacted = redact({"wandb": {"notes": value}, "dataset": {"search_paths": [value]}})
    assert redacted["wandb"]["notes"] == redacted["dataset"]["search_paths"][0]
    assert "PW111" not in redacted["wandb"]["notes"] and kept in redacted["wandb"]["notes"]
    assert "PW111" not in scrub_text(f"notes: {value}\n") and kept in scrub_text(value)
    (argv,) = redact_argv([f"+wandb.notes='{value}'"])
    assert argv == "+wandb.notes='***redacted***'"
    plain = "https://example.com/a@b is fine; tokens_seen 3; user@example.com"
    assert redact({"notes": plain}) == {"notes": plain} and redact_argv([f"x='{plain}'"]) == [
        f"x='{plain}'"]


def test_secret_overrides_never_name_folders():
    assert split_overrides("a='x,y',b=[1,2],c=3") == ["a='x,y'", "b=[1,2]", "c=3"]
    assert folder_suffix("+trainer.token='TOK111,TOK222',trainer.learning_rate=0.1") == \
        "_trainer.learning_rate=0.1"


@pytest.mark.parametrize("value, problem", [
    ("../../etc", "path separator"), ("a\\b", "path separator"), ("..", "starts with a dot"),
    (".hidden", "starts with a dot"), ("", "empty"), ("a\nb", "control character"),
    ("x" * 121, "121 characters")])
def test_folder_names(value, problem):
    with pytest.raises(ConfigError, match=problem):
        check_folder_name("name", value)
    check_folder_name("name", "smoke-2026.11_lr=0.1,seed+1")


@pytest.mark.parametrize("args, message", [
    (["hydra/launcher=nope"], "hydra/launcher=nope is unknown: the hydra/launcher options are "
                              "basic, joblib"),
    (["-m", "seed=0,1", "dataset=digits,nope"], "dataset=nope is unknown: the dataset options"),
])
def test_unknown_group_options_from_the_config_folder_and_plugins(args, message):
    with pytest.raises(ConfigError, match=message):
        check_group_options(args, ROOT / "conf")
    check_group_options(["-m", "hydra/launcher=joblib", "dataset=digits,cifar10", "seed=0,1"],
                        ROOT / "conf")


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


def test_refusals_are_one_complete_line(tmp_path):
    def offline():
        raise Exception("URL fetch failure on https://www.cs.toronto.edu/~kriz/cifar-10-python"
                        ".tar.gz: None -- [Errno -2] Name or service not known\nmore\n" + "x" * 300)
    with pytest.raises(DataError) as error:
        _download("CIFAR-10", offline)
    message = str(error.value)
    assert "\n" not in message and "Name or service not known" in message
    assert message.endswith("dataset=fashion_mnist (Debian's dataset-fashion-mnist)")
    not_a_tar = tmp_path / "cifar-10-python.tar.gz"
    not_a_tar.write_bytes(b"this is not an archive at all" * 10)
    with pytest.raises(DataError) as error:
        read_cifar(not_a_tar, fine=False)
    assert "\n" not in str(error.value)
    assert str(error.value).endswith("re-download it or point dataset.path at a good copy")


def test_native_log_lines_are_dropped_and_others_kept(capfd, monkeypatch):
    monkeypatch.delenv("VIT_ABLATION_DEBUG", raising=False)
    native = (b"WARNING: All log messages before absl::InitializeLog() is called are written to "
              b"STDERR\nI0000 00:00:1795366846.926888    5836 cudart_stub.cc:31] Could not find "
              b"cuda drivers on your machine, GPU will not be used.\nE0000 00:00:1795366853.973241"
              b"    5836 cuda_platform.cc:52] failed call to cuInit: INTERNAL\n")
    with quiet_native_stderr():
        os.write(2, native + b"a Python warning\n")
    assert capfd.readouterr().err == "a Python warning\n"
    monkeypatch.setenv("VIT_ABLATION_DEBUG", "1")
    with quiet_native_stderr():
        os.write(2, native)
    assert "cudart_stub" in capfd.readouterr().err


def test_non_image_files_in_class_folders_are_counted(tmp_path, caplog):
    import numpy as np
    from PIL import Image

    from ablation.data.datasets import load_image_folder

    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(3):
            Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / cls / f"{i}.png")
    (tmp_path / "a" / "notes.txt").write_text("x")
    (tmp_path / "b" / "labels.txt").write_text("x")
    (tmp_path / "b" / "meta.csv").write_text("x")
    with caplog.at_level(logging.WARNING):
        load_image_folder({"path": str(tmp_path), "image_size": 8, "channels": 3,
                           "test_fraction": 0.34, "split_seed": 0})
    lines = [r.getMessage() for r in caplog.records if "not images" in r.getMessage()]
    assert len(lines) == 1 and "skipped 3 file(s)" in lines[0] and "1 .csv, 2 .txt" in lines[0]


def test_data_locations_never_name_job_folders():
    """A path given on the command line holds '/', which no folder name may."""
    from ablation.config import compose

    cfg = compose(["dataset=fashion_mnist", "dataset.search_paths=[/a/b,/c]",
                   "dataset.path=/x/y", "trainer.epochs=2"], hydra_config=True)
    suffix = folder_suffix(cfg.hydra.job.override_dirname)
    assert suffix == "_dataset=fashion_mnist,trainer.epochs=2"
