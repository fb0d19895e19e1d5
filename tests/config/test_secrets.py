"""Secrets are refused, never recorded (ablation/config/secrets.py).

Each row is one refusal through the sweep command, run in this process: exit 2,
one line that names the key (never the value) and points to the environment,
and nothing written (no results, job or sweep folder, no .hydra, no
multirun.yaml, no wandb). Then what only looks like a secret, which is accepted.
"""
import pytest

from ablation.config import ConfigError, check_no_secrets, compose_config
from ablation.config.secrets import names_secret
from tests.helpers.commands import run_cli, run_in_process
from tests.helpers.paths import ROOT
from tests.helpers.refusals import assert_refused, listing

HINT = "W&B reads WANDB_API_KEY or ~/.netrc; secrets never go in the config"
FAKE_KEY = "0123456789abcdef" * 2 + "01234567"  # 40 hex digits, as a W&B key
ENV = {"WANDB_API_KEY": FAKE_KEY, "DEPLOY_TOKEN": "S3KRIT-deploy-token"}
RUN = "S3KRIT" + "a1B2c3D4e5" * 3  # a long alphanumeric run, as tokens have

CASES = {
    # a key that names a secret, at any depth, added with + or not
    "api_key": (["+wandb.api_key=S3KRIT"], "wandb.api_key names a secret"),
    "password": (["+db.password=S3KRIT"], "db.password names a secret"),
    "passwd": (["+db.passwd=S3KRIT"], "db.passwd names a secret"),
    "pwd": (["+db.pwd=S3KRIT"], "db.pwd names a secret"),
    "secret": (["+aws.secret=S3KRIT"], "aws.secret names a secret"),
    "token": (["+hub.token=S3KRIT"], "hub.token names a secret"),
    "*_key": (["+deploy.ssh_key=S3KRIT"], "deploy.ssh_key names a secret"),
    "key": (["+deploy.key=S3KRIT"], "deploy.key names a secret"),
    "camel-case Key": (["+deploy.sshKey=S3KRIT"], "deploy.sshKey names a secret"),
    "*_pat": (["+hub.hf_pat=S3KRIT"], "hub.hf_pat names a secret"),
    "credentials": (["+cloud.credentials=S3KRIT"], "cloud.credentials names a secret"),
    "without +": (["wandb.token=S3KRIT"], "wandb.token names a secret"),
    "inside a dict value": (["+trainer.extra={auth: {token: S3KRIT}}"],
                            "trainer.extra holds a secret-named assignment (token=...)"),
    "Hydra's own keys": (["+hydra.job.env_set.WANDB_API_KEY=S3KRIT"],
                         "hydra.job.env_set.WANDB_API_KEY names a secret"),
    # a URL with user-info, whatever the password holds
    "URL user-info": (["+wandb.notes='see https://alice:S3KRIT@example.com/x'"],
                      "wandb.notes holds a URL with user-info"),
    "URL password with # @ /": (["+wandb.notes='https://u:p#S3KRIT/w@rd@host/x'"],
                                "wandb.notes holds a URL with user-info"),
    # the content of a secret-named environment variable, however the value is built
    "environment, by a name built through an interpolation": (
        ["+wandb.z=WANDB_API_KEY", "+wandb.y='${oc.env:${wandb.z}}'"],
        "wandb.y holds the value of the environment variable WANDB_API_KEY"),
    "environment, by name": (["+wandb.notes='key ${oc.env:WANDB_API_KEY}'"],
                             "wandb.notes holds the value of the environment variable"),
    "environment, written out": ([f"+wandb.notes={FAKE_KEY}"],
                                 "wandb.notes holds the value of the environment variable"),
    "environment, any secret-named variable": (
        ["+trainer.note='${oc.env:DEPLOY_TOKEN}'"],
        "trainer.note holds the value of the environment variable DEPLOY_TOKEN"),
    "environment, in a later job of a sweep": (
        ["-m", "+wandb.y=a,'${oc.env:WANDB_API_KEY}'"],
        "wandb.y holds the value of the environment variable WANDB_API_KEY"),
    "environment, in Hydra's folder": (
        ["hydra.run.dir='${results_dir}/${oc.env:WANDB_API_KEY}'"],
        "the job folder holds the value of the environment variable WANDB_API_KEY"),
    "environment, in a printed config": (
        ["--cfg", "job", "+wandb.z=WANDB_API_KEY", "+wandb.y='${oc.env:${wandb.z}}'"],
        "wandb.y holds the value of the environment variable WANDB_API_KEY"),
    # well-known credential formats, under any key
    "GitHub ghp_": ([f"+wandb.notes=ghp_{RUN}"], "looks like a GitHub token"),
    "GitHub gho_": ([f"+wandb.notes=gho_{RUN}"], "looks like a GitHub token"),
    "GitHub github_pat_": ([f"+wandb.notes=github_pat_{RUN}"], "looks like a GitHub token"),
    "OpenAI sk-": ([f"+wandb.notes=sk-{RUN}"], "looks like an OpenAI-style key"),
    "OpenAI sk-proj-": ([f"+wandb.notes=sk-proj-{RUN}"], "looks like an OpenAI-style key"),
    "AWS access key id": (["+wandb.notes=AKIAS3KRIT0123456789"], "looks like an AWS access key id"),
    "presigned URL": (["+wandb.notes='https://b.s3.amazonaws.com/x?X-Amz-Signature=S3KRIT'"],
                      "looks like a presigned URL's signature"),
    "session cookie": (["+wandb.notes='https://h.org/x?session=S3KRIT'"],
                       "looks like a session cookie"),
    "bearer token": ([f"+wandb.notes='Authorization: Bearer {RUN}'"],
                     "looks like a bearer token"),
    "token= inside a value": (["+wandb.notes='https://h.org/x?page=2&api_key=S3KRIT'"],
                              "wandb.notes holds a secret-named assignment (api_key=...)"),
    # judged before any other check could echo the value
    "a group option": ([f"dataset=ghp_{RUN}"], "dataset holds what looks like a GitHub token"),
    "a value of Hydra's own": ([f"+hydra.job.env_set.GH=ghp_{RUN}"],
                               "hydra.job.env_set.GH holds what looks like a GitHub token"),
}


def base(tmp_path):
    return ["experiment=smoke", f"results_dir={tmp_path}/results", "wandb.mode=offline",
            "trainer.epochs=1", "dataset.limit_train=64", "dataset.limit_test=32",
            "report.after_sweep=false"]


def assert_secret_refused(result, message, tmp_path, before=()):
    assert_refused(result, message, tmp_path, before)
    out = result.stdout + result.stderr
    assert HINT in out and "S3KRIT" not in out and FAKE_KEY not in out, out[-2000:]


@pytest.mark.parametrize("args, message", CASES.values(), ids=CASES.keys())
def test_a_secret_is_refused_in_one_line_before_anything_is_written(tmp_path, args, message):
    assert_secret_refused(run_in_process(*args, *base(tmp_path), env=ENV), message, tmp_path)


def test_a_secret_in_a_config_file_is_refused(tmp_path):
    """A config folder of the user's (``--config-dir``): judged in each job's
    resolved config, before Hydra writes anything."""
    (tmp_path / "site_conf" / "site").mkdir(parents=True)
    (tmp_path / "site_conf" / "site" / "creds.yaml").write_text(
        "# @package _global_\nwandb:\n  server:\n    auth:\n      token: S3KRIT\n")
    before = listing(tmp_path)
    result = run_in_process(f"--config-dir={tmp_path / 'site_conf'}", *base(tmp_path),
                            "+site=creds", env=ENV)
    assert_secret_refused(result, "wandb.server.auth.token names a secret", tmp_path, before)


def test_the_reports_wandb_flags_refuse_a_secret(four_by_three, capsys):
    from ablation.report.__main__ import main as report_main

    before = listing(four_by_three)
    assert report_main([str(four_by_three), "--wandb-mode", "offline",
                        "--project", f"ghp_{RUN}"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --project holds what looks like a GitHub token: {HINT}\n", err
    assert listing(four_by_three) == before


@pytest.mark.slow
def test_the_command_refuses_a_copied_wandb_key_in_its_own_process(tmp_path):
    """The same contract as a user meets it: a sweep whose value is built to
    copy WANDB_API_KEY, with a launcher running jobs in other processes."""
    result = run_cli("-m", "seed=0,1", "hydra/launcher=joblib", *base(tmp_path),
                     "+wandb.z=WANDB_API_KEY", "+wandb.y='${oc.env:${wandb.z}}'", env=ENV)
    assert_secret_refused(result, "wandb.y holds the value of the environment variable "
                                  "WANDB_API_KEY", tmp_path)


# --- what only looks like a secret ---

SECRET_NAMES = ["key", "ssh_key", "DEPLOY_KEY", "sshKey", "pwd", "db_pwd", "hf_pat", "GITHUB_PAT",
                "hfPat", "api_key_b64", "apikey", "MyApiKey", "tokens", "passphrase",
                "client_secret", "aws_credentials"]
NOT_SECRET = ["key_dim", "keys", "hotkeys", "monkey", "key_path", "exclude_keys", "pattern",
              "path", "pat", "spatial", "pwd_dir", "OLDPWD", "passes_per_epoch", "author"]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_names_that_name_a_secret(name):
    assert names_secret(name)
    with pytest.raises(ConfigError, match=f"^x.{name} names a secret: "):
        check_no_secrets({"x": {name: 1}})


@pytest.mark.parametrize("name", NOT_SECRET)
def test_names_that_only_look_alike(name):
    assert not names_secret(name)
    check_no_secrets({"x": {name: 1}}, [f"+x.{name}=1"])


def test_removing_a_secret_named_key_carries_no_secret():
    check_no_secrets({}, ["~wandb.token", "~deploy.api_key=null"])


def test_no_key_of_the_projects_config_names_a_secret():
    """Every key of every option of every group, and Hydra's own: a refusal
    must never fall on one of the suite's settings."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    def keys(node):
        for key, value in node.items():
            yield key
            if isinstance(value, dict):
                yield from keys(value)
    seen = set()
    for path in (ROOT / "conf").rglob("*.yaml"):
        seen |= set(keys(OmegaConf.to_container(OmegaConf.load(path))))
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        seen |= set(keys(OmegaConf.to_container(
            compose("config", ["hydra/launcher=joblib"], return_hydra_config=True))))
    assert {"epochs", "key_dim", "pooling", "n_jobs", "env_set"} <= seen
    assert [k for k in seen if names_secret(k)] == []


@pytest.mark.parametrize("value", [
    "https://example.com/a@b", "https://host:8080/x", "user@example.com",
    "sk-learn-style-augmentation", "tokens_seen 3", "the bearer of news", "lr key: 0.1",
    "0123456789abcdef0123456789abcdef89abcdef",  # a 40-hex commit hash under a plain key
], ids=["@ in a path", "port", "e-mail", "sk- in a word", "token in prose", "bearer in prose",
        "key: in prose", "commit hash"])
def test_values_that_only_look_alike_are_accepted(value):
    check_no_secrets({"wandb": {"notes": value}, "x": [value]}, [f"+wandb.notes='{value}'"])


def test_short_and_shell_variables_are_no_secret_values(monkeypatch):
    """``PWD`` names the working folder; a variable of a few characters
    (``TOKENIZERS_PARALLELISM=false``) would refuse every value that holds it."""
    monkeypatch.setenv("PWD", "/home/someone/projects/vit")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    check_no_secrets({"results_dir": "/home/someone/projects/vit/results", "x": "false"})


def test_every_preset_composes_with_a_key_in_the_environment(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", FAKE_KEY)
    for preset in sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml")):
        compose_config([f"experiment={preset}"])
