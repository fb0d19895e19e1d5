"""A tuned sweep's size line: the jobs it will train, its final runs and trials apart.

A tuned sweep launches none of the jobs its command line composes as they are: it
runs each variant's trials, then each seed's final run in a folder named by the
chosen values. Its first line must count what will train, whatever the sweep folder
already holds: shared-recipe runs of the same variants and seeds (their folders are
not the final runs'), or a search that already ran.
"""
from __future__ import annotations

import re

import pytest

from ablation.runtime.sweep_context import SWEEP_CONTEXT_ENV
from tests.helpers.commands import run_cli

pytest.importorskip("optuna", reason="the test extra installs optuna (vit-ablation[tune])")

TUNED = ["tune=learning_rate", "tune.trials=2"]


def _sweep_config(tmp_path, *extra):
    """The sweep's Hydra config, as ``python run_sweep.py -m`` composes it, for two
    variants of the smoke preset at seed 0."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    overrides = ["spt=true,false", "experiment=smoke", f"results_dir={tmp_path / 'results'}",
                 "wandb.mode=disabled", *extra]
    return GlobalHydra.instance().config_loader().load_configuration(
        "config", overrides, RunMode.MULTIRUN)


def _completed(job: dict, folder) -> None:
    """A completed run of ``job`` in ``folder``."""
    from ablation.job.records import base_record
    from ablation.runs.record import write_record

    record = base_record(job)
    record.update(status="completed",
                  metrics={"test_top1": 0.9, "test_top5": 1.0, "test_loss": 0.3})
    write_record(folder, record)


def _size_line(config, capsys, monkeypatch) -> str | None:
    """What the sweep prints first (its size line), as ``SweepStart`` prints it, with the
    device named and a speed given (no backend imported, nothing probed)."""
    from ablation.sweep import estimate
    from ablation.sweep.callbacks import SweepStart
    from ablation.sweep.speed import Speed

    monkeypatch.setenv(SWEEP_CONTEXT_ENV, "")  # what SweepStart publishes goes afterwards
    monkeypatch.delenv(SWEEP_CONTEXT_ENV)
    monkeypatch.setattr(estimate, "start_backend", lambda job: "cpu, tensorflow")
    monkeypatch.setattr(estimate, "earlier_speed",
                        lambda job, results: Speed(5000.0, 5000.0, 1.0, "earlier runs"))
    capsys.readouterr()
    SweepStart().on_multirun_start(config)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("sweep:")]
    return lines[0] if lines else None


@pytest.fixture
def conf_dir():
    from hydra import initialize_config_dir

    from ablation.config import conf_dir as project_conf_dir

    with initialize_config_dir(str(project_conf_dir()), version_base="1.3"):
        yield


def test_shared_recipe_runs_in_the_folder_are_not_the_final_runs(tmp_path, conf_dir, capsys,
                                                                  monkeypatch):
    from ablation.sweep.callbacks import job_configs

    for job, folder in job_configs(_sweep_config(tmp_path)):  # the shared recipe, completed
        _completed(job, folder)
    line = _size_line(_sweep_config(tmp_path, *TUNED), capsys, monkeypatch)
    # 2 variants x 2 trials, then 2 final runs: all six train
    assert line is not None and line.startswith(
        "sweep: 6 job(s) (2 final run(s), 4 tuning trial(s)) × 3 epochs × "), line
    assert "already completed" not in line


def test_a_search_that_ran_counts_only_what_is_left(tmp_path, conf_dir, capsys, monkeypatch):
    """The journal's finished trials are not counted again; once a study's search has
    ended its final runs are known, and a completed one is not counted either."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from ablation.config.hydra_internals import sweep_jobs
    from ablation.config.tuning import Protocol
    from ablation.sweep.callbacks import job_configs
    from hydra_plugins.vit_ablation.search import Search
    from hydra_plugins.vit_ablation.tuned_sweep import JOURNAL_FILE, TUNING_FOLDER, plan, planned_jobs

    config = _sweep_config(tmp_path, *TUNED)
    jobs = job_configs(config)
    combinations = sweep_jobs(OverridesParser.create().parse_overrides(
        list(config.hydra.overrides.task)))
    composed = {tuple(c): job for c, (job, _) in zip(combinations, jobs)}
    protocol = Protocol.of(jobs[0][0]["tune"])
    studies = {s.variant: s for s in plan(protocol, combinations, lambda c: composed[tuple(c)])}
    journal = tmp_path / "results" / "smoke" / TUNING_FOLDER / JOURNAL_FILE
    journal.parent.mkdir(parents=True)
    search = Search(journal, protocol)
    # SL-ViT's search has ended (2 of 2 trials); the plain ViT has run 1 of its 2
    for variant, scores in (("spt+lsa+temp", [0.9, 0.8]), ("lsa+temp", [0.7])):
        study = studies[variant]
        for score in scores:
            number, _ = search.next_trial(study.id, study.ranges)
            search.tell(study.id, number, score)

    line = _size_line(config, capsys, monkeypatch)
    # the plain ViT's last trial, then both final runs
    assert line is not None and line.startswith(
        "sweep: 3 job(s) (2 final run(s), 1 tuning trial(s)) × 3 epochs × "), line

    # SL-ViT's final run is known: at its best trial's value, in its own folder
    planned = planned_jobs(config, jobs)
    job, folder = next((job, folder) for job, folder in planned
                       if job["spt"] and job["tune"]["role"] == "final")
    plain = studies["spt+lsa+temp"]
    best = search.best(plain.id, plain.ranges)[1]["trainer.learning_rate"]
    assert job["trainer"]["learning_rate"] == best
    assert f"trainer.learning_rate={best}" in folder.name, folder
    _completed(job, folder)
    line = _size_line(config, capsys, monkeypatch)
    assert line is not None and line.startswith(
        "sweep: 2 job(s) (1 final run(s), 1 tuning trial(s)) × 3 epochs × "), line
    assert line.endswith("(1 final run(s) already completed here)"), line


@pytest.mark.slow
def test_the_tuned_command_trains_what_its_size_line_says(tmp_path):
    """The command as a user runs it: the shared recipe first, then the tuned sweep into
    the same folder; the tuned sweep's size line against the jobs it then trained."""
    common = ["-m", "spt=true,false", "experiment=smoke", "trainer.epochs=1",
              f"results_dir={tmp_path}", "wandb.mode=disabled", "report.after_sweep=false"]
    shared = run_cli(*common)
    assert shared.returncode == 0, shared.stderr[-3000:]
    tuned = run_cli(*common, "tune=learning_rate", "tune.trials=1", "estimate=true")
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    size = next(line for line in tuned.stdout.splitlines() if line.startswith("sweep:"))
    started = re.findall(r"^\[(\d+)/(\d+)\] spt=", tuned.stdout, flags=re.M)
    assert len(started) == 4 and {total for _, total in started} == {"4"}, tuned.stdout
    assert size.startswith("sweep: 4 job(s) (2 final run(s), 2 tuning trial(s)) × 1 epochs"), size
    assert "already completed" not in size
    # the same command again: the search and the final runs are done, nothing trains
    again = run_cli(*common, "tune=learning_rate", "tune.trials=1", "estimate=true")
    assert again.returncode == 0, again.stderr[-3000:]
    assert not re.search(r"^sweep:", again.stdout, flags=re.M), again.stdout
    assert again.stdout.count("already completed here: skipped") == 2, again.stdout
    assert " epoch 1/1 " not in again.stdout


def test_the_estimate_leaves_what_is_wrong_with_the_journal_to_the_tuning(
        tmp_path, conf_dir, capsys, monkeypatch, caplog):
    """A trial the journal records unbelievably, or a journal Optuna cannot read, is said
    once, by the tuning that follows the estimate: the estimate says nothing of it."""
    from ablation.config.tuning import Protocol
    from ablation.sweep.callbacks import job_configs
    from hydra_plugins.vit_ablation.search import DamagedJournal, Search
    from hydra_plugins.vit_ablation.tuned_sweep import JOURNAL_FILE, TUNING_FOLDER, plan

    config = _sweep_config(tmp_path, *TUNED)
    jobs = job_configs(config)
    protocol = Protocol.of(jobs[0][0]["tune"])
    study = plan(protocol, [["spt=true"]], lambda c: jobs[0][0])[0]
    journal = tmp_path / "results" / "smoke" / TUNING_FOLDER / JOURNAL_FILE
    journal.parent.mkdir(parents=True)
    search = Search(journal, protocol)
    number, _ = search.next_trial(study.id, study.ranges)
    search.tell(study.id, number, 0.9)
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(line.replace('"values":[0.9]', '"values":["0.9"]')
                               for line in lines))
    with caplog.at_level("WARNING"):
        assert _size_line(config, capsys, monkeypatch) is not None
        assert [r.getMessage() for r in caplog.records] == []
        Search(journal, protocol).used(study.id, study.ranges)
        assert ["is left out" in r.getMessage() for r in caplog.records] == [True]
        caplog.clear()
        journal.write_text("".join([lines[0], "{\n", *lines[1:]]))
        assert _size_line(config, capsys, monkeypatch) is None
        assert [r.getMessage() for r in caplog.records] == []
        with pytest.raises(ValueError) as caught:  # the tuning's one line
            Search(journal, protocol)
        assert type(caught.value).__name__ == DamagedJournal.__name__
