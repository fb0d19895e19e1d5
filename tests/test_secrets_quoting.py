"""More secret names, URL passwords of any characters, values from the
environment, the commands the suite prints for the user to paste, and W&B's
own limits on tags, project and entity names.

Each group of tests fails on the code before its fix; the commands are checked
by pasting them into bash, with stand-ins for ``wandb`` and ``python`` that
only report the arguments they were given.
"""
from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests.helpers.commands import run_cli, run_in_process
from tests.helpers.paths import ROOT
from tests.helpers.refusals import assert_refused

from ablation.config import (
    ConfigError,
    compose_config,
    folder_suffix,
    is_secret_key,
    redact,
    redact_argv,
    scrub_text,
    validate,
)

REDACTED = "***redacted***"

# --- 1. secret names: key / *_key, pwd, *_pat; URL passwords of any characters ---

SECRET_NAMES = ["key", "deploy.key", "ssh_key", "aws.access_key", "DEPLOY_KEY", "x.sshKey",
                "db.pwd", "db_pwd", "hf_pat", "github.GITHUB_PAT", "x.hfPat"]
NOT_SECRET = ["model.key_dim", "keys", "x.keys", "hotkeys", "monkey", "turkey", "key_path",
              "exclude_keys", "pattern", "path", "x.pat", "spatial", "pwd_dir"]


@pytest.mark.parametrize("key", SECRET_NAMES)
def test_key_pwd_and_pat_names_are_secret(key):
    assert is_secret_key(key)
    (argv,) = redact_argv([f"+{key}=SECRET111"])
    assert argv == f"+{key}='{REDACTED}'"
    assert folder_suffix(f"+{key}=SECRET111,trainer.epochs=2") == "_trainer.epochs=2"
    nested = {"a": {key.rsplit(".", 1)[-1]: "SECRET111"}}
    assert redact(nested) == {"a": {key.rsplit(".", 1)[-1]: REDACTED}}


@pytest.mark.parametrize("key", NOT_SECRET)
def test_names_that_only_look_alike_are_not(key):
    assert not is_secret_key(key)
    assert redact_argv([f"{key}=7"]) == [f"{key}=7"]


@pytest.mark.parametrize("text", [
    "deploy:\n  key: SECRET111\n", "- +deploy.key=SECRET111\n", "ssh_key: SECRET111\n",
    "db:\n  pwd: 'SECRET111'\n", "  hf_pat: SECRET111\n",
    "override_dirname: +deploy.key=SECRET111,trainer.epochs=2\n",
    "notes: {key: SECRET111}\n", "url: https://h.org/x?key=SECRET111&page=2\n"])
def test_saved_files_lose_the_new_names_values(text):
    scrubbed = scrub_text(f"seed: 0\n{text}lsa: true\n")
    assert "SECRET111" not in scrubbed and REDACTED in scrubbed, scrubbed
    assert scrubbed.startswith("seed: 0\n") and scrubbed.endswith("lsa: true\n")


def test_hydras_own_saved_config_is_left_as_it_is():
    """Prose that merely mentions a key (Hydra's help template: ``Any key:
    KEY=VALUE``), ``key_dim`` and ``exclude_keys`` are not secrets."""
    import yaml
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from ablation.config import register_resolvers

    register_resolvers()
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        saved = OmegaConf.to_yaml(compose("config", ["experiment=smoke"],
                                          return_hydra_config=True))
    # the template as saved (YAML folds its long string wherever its width falls)
    assert "Any key: KEY=VALUE" in yaml.safe_load(saved)["hydra"]["help"]["template"]
    assert "key_dim" in saved
    assert scrub_text(saved) == saved


@pytest.mark.parametrize("value, kept", [
    ("https://user:p#ss@host/x", "https://***redacted***@host/x"),
    ("https://user:p@ss/word@host/x", "https://***redacted***@host/x"),
    ("https://user:a:b?c%d@host", "https://***redacted***@host"),
    ("postgres://me:p'w\"d@db:5432/x", "postgres://***redacted***@db:5432/x"),
    ("see https://u:#@/:?@h.org now", "see https://***redacted***@h.org now"),
])
def test_a_url_password_of_any_characters_is_masked(value, kept):
    for masked in (redact({"wandb": {"notes": value}})["wandb"]["notes"], scrub_text(value)):
        assert masked == kept, masked
    (argv,) = redact_argv([f"+wandb.link='{value}'"])
    assert argv == f"+wandb.link='{REDACTED}'"
    if "'" not in value:
        assert folder_suffix(f"+trainer.link='{value}',trainer.epochs=2") == "_trainer.epochs=2"
    # no user-info: nothing to hide
    for plain in ("https://example.com/a@b", "https://host:8080/x", "user@example.com"):
        assert scrub_text(plain) == plain and redact_argv([f"x='{plain}'"]) == [f"x='{plain}'"]


@pytest.mark.slow
def test_new_secret_names_reach_no_file_folder_or_terminal(tmp_path):
    out = tmp_path / "results"
    args = {"+deploy.key=KEYTOKEN1": "KEYTOKEN1", "+x.ssh_key=KEYTOKEN2": "KEYTOKEN2",
            "+db.pwd=PWDTOKEN1": "PWDTOKEN1", "+hub.hf_pat=PATTOKEN1": "PATTOKEN1",
            "+wandb.link='https://u:p#URLTOKEN1@host/x'": "URLTOKEN1",
            "+wandb.mirror='https://u:p@URLTOKEN2/w@host'": "URLTOKEN2"}
    result = run_cli("-m", "experiment=smoke", f"results_dir={out}", "trainer.epochs=1",
                     "dataset.limit_train=128", "dataset.limit_test=64", "trainer.verbose=0",
                     "wandb.mode=offline", "report.after_sweep=false", *args)
    terminal = result.stdout + result.stderr
    assert result.returncode == 0, terminal[-3000:]
    files = list(out.rglob("*"))
    assert any(p.name == "run.json" for p in files) and any(p.suffix == ".wandb" for p in files)
    assert any(p.parent.name == ".hydra" for p in files)
    for token in args.values():
        assert token not in terminal, token
        for path in files:
            assert token not in str(path), path
            if path.is_file():
                assert token.encode() not in path.read_bytes(), (token, path)


# --- 2. ${oc.env:...}: never in a folder name, a setting, or a secret copied into a record ---

ENV = {"VIT_TEST_VALUE": "from-the-environment", "DEPLOY_TOKEN": "ENVSECRET1"}


@pytest.fixture
def environment(monkeypatch):
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)


@pytest.mark.parametrize("overrides, key", [
    (["name=${oc.env:VIT_TEST_VALUE}"], "name"),
    (["sweep_id=x-${oc.env:VIT_TEST_VALUE}"], "sweep_id"),
    (["run_name=${oc.env:VIT_TEST_VALUE}"], "run_name"),
    (["+trainer.note=${oc.env:VIT_TEST_VALUE}"], "trainer.note"),
    (["trainer.learning_rate='${oc.decode:${oc.env:VIT_TEST_RATE,0.01}}'"],
     "trainer.learning_rate"),
    (["seed=${oc.env:VIT_TEST_SEED,3}"], "seed"),
    (["spt=${oc.env:VIT_TEST_SPT,false}"], "spt"),
    # through another key that is no setting itself
    (["+wandb.x=${oc.env:VIT_TEST_VALUE}", "name=${wandb.x}"], "name"),
    (["+wandb.x=${oc.env:VIT_TEST_VALUE}", "+trainer.y=${oc.select:wandb.x,z}"], "trainer.y"),
], ids=["name", "sweep_id", "run_name", "new setting", "setting", "seed", "switch",
        "through a reference", "through oc.select"])
def test_the_environment_names_no_folder_and_no_setting(environment, overrides, key):
    with pytest.raises(ConfigError, match=rf"^{key}=.* takes its value from the environment"):
        compose_config(["experiment=smoke", *overrides])


def test_a_secret_from_the_environment_is_refused_anywhere(environment):
    with pytest.raises(ConfigError, match="DEPLOY_TOKEN.*secret"):
        compose_config(["experiment=smoke", "+wandb.notes='x ${oc.env:DEPLOY_TOKEN}'"])


def test_paths_and_where_to_log_may_come_from_the_environment(environment, tmp_path):
    """A common Hydra habit: dataset.path=${oc.env:DATA}/cifar. Paths, the W&B
    destination and mode name no folder and are no setting."""
    config = compose_config(["experiment=smoke", "dataset=cifar10",
                             "dataset.path=${oc.env:VIT_TEST_VALUE}/x",
                             "results_dir=${oc.env:VIT_TEST_VALUE}/results",
                             "wandb.project=${oc.env:VIT_TEST_VALUE}"])
    assert config["dataset"]["path"] == "from-the-environment/x"
    assert config["wandb"]["project"] == "from-the-environment"
    assert config["wandb"]["mode"] in ("online", "offline", "disabled")  # ${oc.env:WANDB_MODE,...}


def test_an_environment_value_in_a_sweep_is_refused_before_anything_is_written(tmp_path):
    result = run_in_process("-m", "experiment=smoke", f"results_dir={tmp_path}/results",
                            "wandb.mode=disabled", "trainer.epochs=1",
                            "dataset.limit_train=64", "dataset.limit_test=32",
                            "report.after_sweep=false", "name=a,${oc.env:VIT_TEST_VALUE}",
                            env=ENV)
    assert_refused(result, "name='${oc.env:VIT_TEST_VALUE}' takes its value from the "
                           "environment", tmp_path)


def test_an_environment_value_in_a_setting_is_refused_by_the_command(tmp_path):
    result = run_in_process("experiment=smoke", f"results_dir={tmp_path}/results",
                            "wandb.mode=disabled", "trainer.epochs=1",
                            "dataset.limit_train=64", "dataset.limit_test=32",
                            "+trainer.note=${oc.env:VIT_TEST_VALUE}", env=ENV)
    assert_refused(result, "trainer.note='${oc.env:VIT_TEST_VALUE}' takes its value from the "
                           "environment", tmp_path)


def test_an_environment_value_in_a_config_dir_file_is_refused(tmp_path):
    """A config folder of the user's (``--config-dir``), left to Hydra otherwise."""
    (tmp_path / "site_conf" / "site").mkdir(parents=True)
    (tmp_path / "site_conf" / "site" / "env.yaml").write_text(
        "# @package _global_\ntrainer:\n  note: ${oc.env:VIT_TEST_VALUE}\n")
    result = run_in_process(f"--config-dir={tmp_path / 'site_conf'}", "experiment=smoke",
                            f"results_dir={tmp_path}/results", "wandb.mode=disabled",
                            "trainer.epochs=1", "dataset.limit_train=64",
                            "dataset.limit_test=32", "+site=env", env=ENV)
    assert_refused(result, "trainer.note='${oc.env:VIT_TEST_VALUE}' takes its value from the "
                           "environment", tmp_path, ["site_conf", "site_conf/site",
                                                     "site_conf/site/env.yaml"])


# --- 3. every command printed for the user to paste is shell-quoted ---

HOSTILE = ["a;touch pwned", "$(touch pwned)", "`touch pwned`", "it's \"q\" & x", "a b"]


@pytest.fixture
def paste(tmp_path):
    """Run a printed command as pasted into bash; the arguments ``wandb`` or
    ``python`` received (stand-ins that print them), and check that nothing
    else ran."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    work.mkdir()
    for name in ("wandb", "python"):
        stub = bin_dir / name
        stub.write_text("#!/bin/sh\nprintf '%s\\0' \"$(basename \"$0\")\" \"$@\"\n")
        stub.chmod(0o755)

    def run(command: str) -> list[str]:
        done = subprocess.run(["bash", "-c", command], cwd=work, capture_output=True,
                              text=True, check=False, env={"PATH": f"{bin_dir}:/usr/bin:/bin",
                                              "HOME": "/nonexistent-home"})
        assert done.returncode == 0, (command, done.stderr)
        assert list(work.iterdir()) == [], (command, list(work.iterdir()))  # nothing ran
        return done.stdout.split("\0")[:-1]
    return run


def sweep_folder(tmp_path: Path, name: str) -> Path:
    """A sweep folder under a results_dir holding a space and ``$``."""
    sweep = tmp_path / "res $HOME dir" / name
    (sweep / "wandb" / "offline-run-1").mkdir(parents=True)
    (sweep / "job-s0" / "wandb" / "offline-run-2").mkdir(parents=True)
    return sweep


@pytest.mark.parametrize("name", HOSTILE)
def test_the_sweeps_sync_command_is_quoted(tmp_path, paste, name):
    from ablation.report.wandb_run import sync_command

    sweep = sweep_folder(tmp_path, name)
    assert paste(sync_command(sweep)) == [
        "wandb", "sync", str(sweep / "wandb" / "offline-run-1"),
        str(sweep / "job-s0" / "wandb" / "offline-run-2")]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_jobs_sync_lines_are_quoted(tmp_path, paste, name, monkeypatch, caplog):
    import wandb

    from ablation.runs import tracking

    job = sweep_folder(tmp_path, name) / "job-s0"
    run_dir = job / "wandb" / "offline-run-2"
    line = tracking.where(SimpleNamespace(dir=str(run_dir / "files"), offline=True, id="r1",
                                          url=None))
    assert line.endswith(")")
    command = line.split("(upload later: ", 1)[1][:-1]
    assert paste(command) == ["wandb", "sync", str(run_dir)]

    # online, but W&B is out of reach: the fallback's warning
    monkeypatch.setattr(tracking, "unreachable", lambda url: "no network here")
    monkeypatch.setattr(wandb, "init", lambda **kwargs: SimpleNamespace(**kwargs))
    with caplog.at_level(logging.WARNING, logger=tracking.log.name):
        tracking.open_run("online", job, project="p")
    (message,) = [r.getMessage() for r in caplog.records if "upload later with: " in
                  r.getMessage()]
    assert paste(message.split("upload later with: ", 1)[1]) == ["wandb", "sync", str(run_dir)]


@pytest.mark.parametrize("name", HOSTILE)
def test_the_report_commands_are_quoted(tmp_path, paste, name, monkeypatch, caplog):
    from omegaconf import OmegaConf

    import ablation.report
    from ablation.sweep import outcomes
    from ablation.sweep.callbacks import SweepEnd

    sweep = sweep_folder(tmp_path, name)
    lines = outcomes.summary(sweep, [], [(sweep / "job-s0", "held by pid 1")])
    (line,) = [li for li in lines if "python -m ablation.report" in li]
    assert paste(line.split("the report with them: ", 1)[1]) == [
        "python", "-m", "ablation.report", str(sweep)]

    config = OmegaConf.create({"wandb": {"mode": "offline"}, "report": {"plots": False}})
    for error, marker, extra in ((PermissionError(13, "Permission denied"), "elsewhere: ",
                                  ["--out", "DIR"]),
                                 (RuntimeError("bug"), "rerun it with: ", [])):
        def fail(*args, error=error, **kwargs):
            raise error
        monkeypatch.setattr(ablation.report, "write_report", fail)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            SweepEnd.write_report(config, str(sweep))
        (message,) = [r.getMessage() for r in caplog.records if marker in r.getMessage()]
        assert paste(message.split(marker, 1)[1]) == [
            "python", "-m", "ablation.report", str(sweep), *extra]


@pytest.mark.parametrize("name", HOSTILE)
def test_the_dashboard_publish_command_is_quoted(tmp_path, paste, name):
    from ablation.report.dashboard import publish_command

    sweep = sweep_folder(tmp_path, name)
    base = ["python", "-m", "ablation.report", str(sweep), "--wandb-dashboard",
            "--wandb-mode", "online", "--project"]
    assert paste(publish_command(sweep, f"p {name}", f"team {name}")) == [
        *base, f"p {name}", "--entity", f"team {name}"]
    # no entity known: W&B's default entity for the credentials (no placeholder to edit)
    assert paste(publish_command(sweep, "vit-ablation", None)) == [*base, "vit-ablation"]


# --- 4. W&B's limits: checked with the other values, before any job ---

W_AND_B = {
    "tag of 65 characters": (["wandb.tags=[ok," + "t" * 65 + "]"],
                             "is 65 characters; W&B allows 1 to 64 characters per tag"),
    "empty tag": (["wandb.tags=[ok,'']"], "wandb.tags holds an empty tag"),
    "project with a slash": (["wandb.project=a/b"],
                             "wandb.project='a/b' cannot name a W&B project: it contains '/'"),
    "project with a colon": (["wandb.project='a:b'"], "it contains ':'"),
    "project with a hash": (["wandb.project='a#b'"], "it contains '#'"),
    "project with a percent": (["wandb.project='a%b'"], "it contains '%'"),
    "project with a question mark": (["wandb.project='a?b'"], "it contains '?'"),
    "project with a backslash": (["wandb.project='a\\\\b'"], "it contains '\\'"),
    "long project": (["wandb.project=" + "p" * 129],
                     "cannot name a W&B project: it is 129 characters (at most 128)"),
    "entity with a slash": (["wandb.entity=me/team"],
                            "wandb.entity='me/team' cannot name a W&B entity: it contains '/'"),
    "group too long": (["wandb.mode=offline", "wandb.group=" + "g" * 129],
                       "wandb.group='gggggggggggggggggggg...gggggggggggggggggggg' (the sweep's "
                       "id unless set) is 129 characters: W&B allows at most 128"),
    "dataset name as a tag": (["wandb.mode=offline", "dataset.name=" + "d" * 70],
                              "dataset.name='ddd"),  # the suite tags runs with it
}


@pytest.mark.parametrize("overrides, message", W_AND_B.values(), ids=W_AND_B.keys())
def test_wandb_limits_are_checked_with_the_config(overrides, message):
    config = compose_config(["experiment=smoke", *overrides])
    with pytest.raises(ConfigError) as refused:
        validate(config)
    assert message in str(refused.value) and len(str(refused.value)) < 400


def test_wandb_limits_allow_what_wandb_allows():
    validate(compose_config(["experiment=smoke", "wandb.tags=[" + "t" * 64 + ",b]",
                             "wandb.project=" + "p" * 128, "wandb.entity=my-team_2",
                             "wandb.group=" + "g" * 128]))
    validate(compose_config(["experiment=smoke", "wandb.project='my project (v2)'"]))
    validate(compose_config(["experiment=smoke", "wandb.mode=disabled",
                             "dataset.name=" + "d" * 70, "wandb.group=" + "g" * 129]))  # no run


@pytest.mark.parametrize("case", ["tag of 65 characters", "project with a slash",
                                  "entity with a slash"])
def test_a_wandb_limit_stops_the_sweep_before_anything_is_written(tmp_path, case):
    overrides, message = W_AND_B[case]
    result = run_in_process("-m", "experiment=smoke", f"results_dir={tmp_path}/results",
                            "trainer.epochs=1", "dataset.limit_train=64",
                            "dataset.limit_test=32", "wandb.mode=disabled",
                            "report.after_sweep=false", "seed=0,1", *overrides)
    assert_refused(result, message, tmp_path)


@pytest.mark.parametrize("flags, message", [
    (["--project", "a/b"], "--project 'a/b' cannot name a W&B project: it contains '/'"),
    (["--project", "p" * 129], "it is 129 characters (at most 128)"),
    (["--entity", "team#1"], "--entity 'team#1' cannot name a W&B entity: it contains '#'"),
], ids=["project with a slash", "project too long", "entity with a hash"])
def test_the_reports_wandb_flags_are_checked_before_anything_is_written(
        four_by_three, capsys, flags, message):
    from ablation.report.__main__ import main as report_main

    before = sorted(p.relative_to(four_by_three) for p in four_by_three.rglob("*"))
    assert report_main([str(four_by_three), "--wandb-mode", "offline", *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert sorted(p.relative_to(four_by_three) for p in four_by_three.rglob("*")) == before
