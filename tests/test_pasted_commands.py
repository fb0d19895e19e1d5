"""Every command the suite prints for the user to paste is shell-quoted: each is
pasted into bash, with stand-ins for ``wandb`` and ``python`` that only report
the arguments they were given, and nothing else may run."""
from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

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
    from hydra_plugins.vit_ablation.outcomes import report_sweep, summary

    sweep = sweep_folder(tmp_path, name)
    lines = summary(sweep, [], [(sweep / "job-s0", "held by pid 1")])
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
            report_sweep(config, str(sweep))
        (message,) = [r.getMessage() for r in caplog.records if marker in r.getMessage()]
        assert paste(message.split(marker, 1)[1]) == [
            "python", "-m", "ablation.report", str(sweep), *extra]

    def stopped(*args, **kwargs):  # Ctrl-C while the sweep's report is written
        raise KeyboardInterrupt
    monkeypatch.setattr(ablation.report, "write_report", stopped)
    with pytest.raises(KeyboardInterrupt) as caught:
        report_sweep(config, str(sweep))
    assert caught.value.then.startswith("every job's record stands; write the report with: ")
    assert paste(caught.value.then.split("with: ", 1)[1]) == [
        "python", "-m", "ablation.report", str(sweep)]
