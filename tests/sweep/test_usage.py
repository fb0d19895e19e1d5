"""``--help`` leads with what a user needs; ``-m --cfg`` shows every job's config;
Hydra's own flags that cannot go together are refused in one line."""
from __future__ import annotations

import re

import pytest
import yaml

from tests.helpers.commands import run_cli, run_in_process
from tests.helpers.paths import CONF, ROOT

SMOKE = "python run_sweep.py -m spt=true,false lsa=true,false experiment=smoke"
FACTORIAL = ("python run_sweep.py -m spt=true,false lsa=true,false "
             "learnable_temperature=true,false seed=0,1,2")
REPORT = "python -m ablation.report results/<sweep>"


@pytest.fixture(scope="module")
def help_page():
    """``python run_sweep.py --help``, run as a user runs it."""
    result = run_cli("--help", timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_the_help_page_leads_with_usage_then_the_three_commands(help_page):
    lines = help_page.splitlines()
    assert lines[0].startswith("usage: python run_sweep.py [-m] [KEY=VALUE ...]")
    commands = [line.strip() for line in lines if line.strip().startswith("python ")]
    assert commands == [SMOKE, FACTORIAL, REPORT]
    for command in commands:  # each followed by what it does and costs
        following = lines[[line.strip() for line in lines].index(command) + 1]
        assert following.startswith("      ") and len(following.strip()) > 20, following


def test_the_help_page_names_every_preset_with_its_own_description(help_page):
    """Every option of the experiment, model, trainer and dataset groups, with the
    first words of its file's header comment: a new preset cannot be left out."""
    from ablation.sweep.usage import SMALL

    for group in ("experiment", "model", "trainer", "dataset"):
        stems = {path.stem for path in (CONF / group).glob("*.yaml")}
        for path in sorted((CONF / group).glob("*.yaml")):
            small = path.stem.endswith(SMALL) and path.stem.removesuffix(SMALL) in stems
            first = f"{group}={path.stem.removesuffix(SMALL) if small else path.stem}"
            line = next((line for line in help_page.splitlines()
                         if line.split()[:1] in ([first], [first + ","])), None)
            assert line is not None, f"{group}={path.stem} is not on the help page"
            header = next(text for text in path.read_text().splitlines()
                          if text.startswith("#") and "@package" not in text)
            if small:  # a small copy: named on its preset's line, and says what it is
                assert f" {path.stem} " in line + " " and "tiny" in header, (line, header)
                continue
            description = line.split("  ", 2)[-1].strip()
            assert header.lstrip("# ").startswith(description[:20]), (line, header)
    for group in ("augmentation", "diagnostics", "gpu", "wandb"):
        assert group in help_page


def test_the_help_page_points_to_the_docs_and_to_hydras_own_help(help_page):
    named = set(re.findall(r"docs/[\w-]+\.md", help_page))
    assert named == {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert "README.md" in help_page
    assert "--hydra-help" in help_page


def test_the_help_page_fits_one_screen(help_page):
    lines = help_page.rstrip("\n").splitlines()
    assert len(lines) <= 45, len(lines)
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)


def test_hydras_own_help_stays_reachable():
    result = run_in_process("--hydra-help")
    assert result.returncode == 0, result.stderr
    assert "== Flags ==" in result.stdout and "--multirun,-m" in result.stdout
    assert "usage: python run_sweep.py" not in result.stdout


def test_a_preset_description_is_its_headers_first_sentence(tmp_path):
    from ablation.sweep.usage import header_summary, shorten

    preset = tmp_path / "x.yaml"
    preset.write_text("# @package _global_\n# Real images, e.g. Tiny-ImageNet, on a\n"
                      "# CPU. More detail.\n#   python run_sweep.py -m experiment=x\nname: x\n")
    assert header_summary(preset) == "Real images, e.g. Tiny-ImageNet, on a CPU"
    (tmp_path / "bare.yaml").write_text("name: bare\n")
    assert header_summary(tmp_path / "bare.yaml") == ""
    assert shorten("The recipe (official code): model, training", 30) == \
        "The recipe (official code)"
    assert shorten("The recipe, with its schedule applied", 20) == "The recipe"


def job_documents(stdout: str) -> list[dict]:
    documents = list(yaml.safe_load_all(stdout))
    assert all(isinstance(d, dict) for d in documents), stdout[:2000]
    return documents


def test_multirun_cfg_job_prints_each_jobs_config_and_writes_nothing(tmp_path):
    results = tmp_path / "results"
    result = run_in_process("-m", "--cfg", "job", "spt=true,false", "lsa=true,false",
                            "experiment=smoke", f"results_dir={results}")
    assert result.returncode == 0, result.stderr[-2000:]
    headers = re.findall(r"^--- # job (\d)/4: (.*)$", result.stdout, flags=re.MULTILINE)
    assert [n for n, _ in headers] == ["1", "2", "3", "4"]
    documents = job_documents(result.stdout)
    assert {(d["spt"], d["lsa"]) for d in documents} == {
        (True, True), (True, False), (False, True), (False, False)}
    assert all(d["dataset"]["name"] == "digits" and "hydra" not in d for d in documents)
    assert not results.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["hydra", "all"])
def test_multirun_cfg_hydra_and_all_print_each_job(tmp_path, kind):
    result = run_in_process("-m", "--cfg", kind, "seed=0,1", f"results_dir={tmp_path}/r")
    assert result.returncode == 0, result.stderr[-2000:]
    documents = job_documents(result.stdout)
    assert len(documents) == 2 and all("hydra" in d for d in documents)
    if kind == "all":
        assert [d["seed"] for d in documents] == [0, 1]
    assert list(tmp_path.iterdir()) == []


def test_multirun_cfg_with_package_and_resolve(tmp_path):
    result = run_in_process("-m", "--cfg", "job", "--resolve", "-p", "run_name",
                            "spt=true,false", "lsa=false", f"results_dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-2000:]
    shown = [line for line in result.stdout.splitlines() if not line.startswith("---")]
    assert shown == ["spt-s0", "vit-s0"]


@pytest.mark.parametrize("args, message", [
    (["-m", "--info", "all"], "--info describes one configuration, not a sweep: drop -m"),
    (["-m", "--info", "all", "spt=true,false"], "use -m --cfg job to print each job's config"),
    (["--cfg", "job", "spt=true,false"],
     "spt=true,false has several values: add -m to print each job's config"),
    (["--info", "all", "lsa=true,false"], "lsa=true,false has several values: --info describes"),
    (["experiment=smoke", "seed=0,1"], "seed=0,1 has several values: add -m to run one job"),
    (["--info", "all", "--cfg", "job"], "--cfg and --info cannot be combined"),
    (["--resolve"], "--resolve goes with --cfg"),
    (["-m", "--cfg", "job", "trainer.epoch=1,2"], "trainer.epoch is not a config key"),
    (["-m", "--cfg", "hydra", "-p", "hydra.sweep.subdir", "--resolve"],
     "use --cfg all --resolve, with -p hydra.<key>"),
    (["--cfg", "hydra", "-p", "hydra.run.dir"], "use --cfg all --resolve, with -p hydra.<key>"),
    (["--cfg", "hydra", "-p", "_global_", "--resolve"], "use --cfg all --resolve"),
    (["--cfg", "hydra", "-p", "hydra.launcher", "--resolve", "hydra/launcher=submitit_local"],
     "use --cfg all --resolve"),
], ids=["-m --info", "-m --info with sweep values", "--cfg with sweep values",
        "--info with sweep values", "sweep values without -m", "--cfg --info", "--resolve alone",
        "-m --cfg, a typo'd key", "--cfg hydra --resolve", "--cfg hydra, a folder",
        "--cfg hydra, _global_", "--cfg hydra, submitit's folder"])
def test_what_hydra_refuses_in_a_traceback_is_one_line(tmp_path, args, message):
    result = run_in_process(*args, f"results_dir={tmp_path}/results")
    assert result.returncode == 2, result.stdout[-1000:] + result.stderr[-1000:]
    assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
    assert result.stderr.startswith("error: ") and message in result.stderr, result.stderr
    assert result.stdout == ""  # nothing half-printed, not even a first job's config
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, shown", [
    (["--cfg", "hydra", "-p", "hydra.job.name", "--resolve"], "run_sweep"),
    (["--cfg", "all", "-p", "hydra.run.dir", "--resolve"], "/spt+lsa+temp-s0"),
    (["--cfg", "hydra", "-p", "hydra.run.dir", "hydra.run.dir=/somewhere/mine"],
     "/somewhere/mine"),
], ids=["--cfg hydra, a key naming no job key", "--cfg all, a folder",
        "--cfg hydra, a folder given whole"])
def test_hydras_config_that_resolves_is_shown(tmp_path, args, shown):
    result = run_in_process(*args, f"results_dir={tmp_path}/results")
    assert result.returncode == 0, result.stderr[-1000:]
    assert result.stdout.strip().endswith(shown), result.stdout


@pytest.mark.parametrize("args", [["--info", "nonsense"],
                                  ["seed=1", "-m", "--cfg", "job", "seed=2"]],
                         ids=["a bad flag value", "an override after the flags"])
def test_an_argparse_error_is_printed_once(tmp_path, args):
    """argparse's own usage and error, from Hydra, once (the checks before Hydra
    stay silent), and ``-m --cfg`` does not drop what argparse could not place."""
    result = run_in_process(f"results_dir={tmp_path}", *args)
    assert result.returncode == 2 and result.stdout == "", result.stdout[-1000:]
    assert result.stderr.count("usage: ") == 1 and " error: " in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_showing_the_config_needs_no_working_keras_backend(tmp_path):
    """Only a job needs Keras: --cfg and --help answer with a backend that cannot load."""
    result = run_cli("-m", "--cfg", "job", "-p", "seed", "seed=0,1", f"results_dir={tmp_path}",
                     env={"KERAS_BACKEND": "tensorflw"}, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert [line for line in result.stdout.splitlines() if not line.startswith("---")] == \
        ["0", "1"]


def test_hydras_version_is_printed_once():
    result = run_in_process("--version")
    assert result.returncode == 0 and result.stdout.count("Hydra ") == 1, result.stdout
