"""tune=...: each variant searched on validation with the same budget, then its final runs.

The end-to-end test runs one tuned sweep twice on an image folder of the real
digits: once killed with SIGKILL in the middle of its search and resumed (with a
second process refused while the first holds the search), once through without
a stop on a copy of the data whose test split has wrong labels. The chosen
values must come out the same: the search reads validation only, a resumed
search proposes what an unbroken one does, and the sampler seed fixes it.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ablation.config.compose import compose_config
from ablation.config.refusals import ConfigError
from ablation.config.tuning import Protocol, tuning_entry
from hydra_plugins.vit_ablation.search import DamagedJournal, Search
from hydra_plugins.vit_ablation.tuned_sweep import (
    JOURNAL_FILE,
    TUNING_FOLDER,
    check_jobs,
    final_overrides,
    plan,
    trial_overrides,
)
from tests.helpers.commands import cli_env, run_cli, suite_defaults
from tests.helpers.paths import ROOT

pytest.importorskip("optuna", reason="the test extra installs optuna (vit-ablation[tune])")

TUNE = ["experiment=smoke", "tune=learning_rate"]


def _config_of(*extra):
    return lambda overrides: compose_config([*TUNE, *extra, *overrides])


def test_studies_are_the_variants_each_with_its_final_seeds_and_the_same_budget():
    combinations = [[f"spt={spt}", f"seed={seed}"] for spt in ("true", "false") for seed in (0, 1)]
    protocol = Protocol.of(compose_config(TUNE)["tune"])
    studies = plan(protocol, combinations, _config_of())
    assert [s.variant for s in studies] == ["spt+lsa+temp", "lsa+temp"]
    assert [s.finals for s in studies] == [combinations[:2], combinations[2:]]
    assert studies[0].centre == {"trainer.learning_rate": 0.003}  # the smoke preset's
    low, high = studies[0].ranges["trainer.learning_rate"]
    assert low == pytest.approx(0.0003) and high == pytest.approx(0.03)
    assert studies[0].id != studies[1].id
    # a command naming other paths or outputs finds the same studies; another setting does not
    again = plan(protocol, combinations, _config_of("results_dir=elsewhere", "report.plots=false"))
    assert [s.id for s in again] == [s.id for s in studies]
    other = plan(protocol, combinations, _config_of("trainer.batch_size=32"))
    assert other[0].id != studies[0].id

    trial = trial_overrides(studies[0], 3, {"trainer.learning_rate": 0.0012345})
    assert "seed=1000" in trial and "trainer.learning_rate=0.00123" in trial
    assert "run_name=spt+lsa+temp-s1000-trial3" in trial and "tune.role=trial" in trial
    with_epochs = plan(Protocol.of(compose_config([*TUNE, "tune.epochs=1"])["tune"]),
                       [["trainer.epochs=5", "seed=0"]], _config_of("tune.epochs=1"))[0]
    trial_epochs = [o for o in trial_overrides(with_epochs, 0, {"trainer.learning_rate": 0.001})
                    if o.startswith("trainer.epochs=")]
    assert trial_epochs == ["trainer.epochs=1"]  # replaced, not named twice
    final = final_overrides(studies[0], combinations[1],
                            {"trainer.learning_rate": 0.0012345})
    assert final[:2] == combinations[1] and "tune.role=final" in final
    entry = tuning_entry(compose_config([*TUNE, *trial]))
    assert entry["values"] == {"trainer.learning_rate": 0.00123} and entry["trial"] == 3
    assert entry["study"] == studies[0].id and entry["objective"] == "final_val_top1"


@pytest.mark.parametrize("extra, says", [
    (["trainer.protocol=official"], "needs a validation split"),
    (["tune.search_seed=1"], "tune.search_seed=1 is also a final seed"),
    (["tune.params=[model.dropout_rate]"], "no key of the config"),
    (["trainer.weight_decay=0", "tune=learning_rate_weight_decay"], "must be a positive number"),
])
def test_an_unfair_or_impossible_search_is_refused_in_one_line(extra, says):
    config_of = _config_of(*extra)
    with pytest.raises(ConfigError, match=says) as caught:
        check_jobs([config_of(["spt=true", "seed=0"]), config_of(["spt=true", "seed=1"])])
    assert "\n" not in str(caught.value)


def _objective(values):
    """A smooth stand-in for a validation top-1, best at 0.002."""
    return 1.0 - (np.log10(values["trainer.learning_rate"]) - np.log10(0.002)) ** 2 / 10


RANGES = {"trainer.learning_rate": (0.0003, 0.03)}


def _search(journal, protocol, study="a", trials=None, stop_after=None):
    """Run ``study``'s search to its budget; the (number, value) proposals in order."""
    search = Search(journal, protocol)
    seen = []
    while search.used(study, RANGES) < (trials or protocol.trials):
        number, values = search.next_trial(study, RANGES)
        seen.append((number, values["trainer.learning_rate"]))
        if stop_after is not None and len(seen) == stop_after:
            return seen  # stopped with this trial in flight
        search.tell(study, number, _objective(values))
    return seen


def test_the_search_is_reproducible_and_resumes_the_trial_in_flight(tmp_path):
    protocol = Protocol(params=("trainer.learning_rate",), spread=10, trials=6, sampler_seed=0,
                        search_seed=1000, epochs=None)
    unbroken = _search(tmp_path / "a.log", protocol)
    assert len(unbroken) == 6 and len({v for _, v in unbroken}) == 6
    assert all(0.0003 <= v <= 0.03 and v == float(f"{v:.3g}") for _, v in unbroken)
    assert _search(tmp_path / "b.log", protocol) == unbroken  # the same seed, the same values
    other = _search(tmp_path / "c.log", Protocol(**{**protocol.__dict__, "sampler_seed": 1}))
    assert [v for _, v in other] != [v for _, v in unbroken]
    # every study draws the same start-up values (common random numbers)
    start = protocol.trials // 2
    assert [v for _, v in _search(tmp_path / "a.log", protocol, study="b")][:start] == \
        [v for _, v in unbroken][:start]

    journal = tmp_path / "resumed.log"
    first = _search(journal, protocol, stop_after=4)  # a kill with trial 3 in flight
    import optuna  # a kill between asking and launching: a trial without values

    optuna.load_study(study_name="a", storage=Search(journal, protocol).storage).ask()
    rest = _search(journal, protocol)
    assert rest[0] == first[-1]  # the trial in flight, handed out again with its values
    assert first[:-1] + rest == unbroken[:3] + [unbroken[3]] + [(n + 1, v) for n, v in unbroken[4:]]
    assert Search(journal, protocol).used("a", RANGES) == 6  # the one never launched: not counted
    best = Search(journal, protocol).best("a", RANGES)
    assert best[1]["trainer.learning_rate"] == max(unbroken, key=lambda t: _objective(
        {"trainer.learning_rate": t[1]}))[1]


def _planted(journal, protocol, values, score):
    """A trial written into the journal by hand (or by a damaged write): not proposed.
    ``score`` as text: the JSON written in its place (Optuna itself writes no NaN)."""
    import optuna
    from optuna.distributions import FloatDistribution

    study = optuna.load_study(study_name="a", storage=Search(journal, protocol).storage)
    stand_in = 0.123456 if isinstance(score, str) else score
    study.add_trial(optuna.trial.create_trial(
        params={"trainer.learning_rate": 0.003},
        distributions={"trainer.learning_rate": FloatDistribution(0.0003, 0.03, log=True)},
        value=stand_in, user_attrs={"values": values}))
    if isinstance(score, str):
        journal.write_text(journal.read_text().replace(str(stand_in), score))


@pytest.mark.parametrize("values, score, says", [
    ({"trainer.learning_rate": 0.5}, 0.9, "trainer.learning_rate=0.5 is outside the searched"),
    ({"trainer.learning_rate": 0.003, "hydra.sweep.dir": 9}, 0.9, "not the searched"),
    ({"trainer.learning_rate": "0.003"}, 0.9, "trainer.learning_rate='0.003' is not a number"),
    ({"trainer.learning_rate": 0.003}, 99.9, "its score 99.9 is not a fraction in [0, 1]"),
    ({"trainer.learning_rate": 0.003}, "NaN", "its score nan is not a fraction"),
    ({"trainer.learning_rate": 0.003}, '"0.99"', "its score '0.99' is not a number"),
    ({"trainer.learning_rate": 0.003}, "1" + "0" * 400, "its score 1000000000000000000000"),
])
def test_a_journal_trial_that_is_not_believable_is_left_out(tmp_path, caplog, values, score,
                                                            says):
    """Only the trials the search proposed, in range and scored as fractions, count
    toward the budget and the choice, and only they reach the sampler (the next
    proposal is the honest journal's); a planted one is said in one short line."""
    protocol = Protocol(params=("trainer.learning_rate",), spread=10, trials=3, sampler_seed=0,
                        search_seed=1000, epochs=None)
    journal = tmp_path / "journal.log"
    honest = _search(journal, protocol)
    best = Search(journal, protocol).best("a", RANGES)
    shutil.copy(journal, tmp_path / "honest.log")
    _planted(journal, protocol, values, score)
    search = Search(journal, protocol)
    with caplog.at_level("WARNING"):
        assert search.used("a", RANGES) == len(honest)
        assert search.best("a", RANGES) == best
        assert search.progress("a", RANGES) == (len(honest), best)
        assert search.next_trial("a", RANGES)[1] == \
            Search(tmp_path / "honest.log", protocol).next_trial("a", RANGES)[1]
    warned = [r.getMessage() for r in caplog.records if "is left out" in r.getMessage()]
    assert len(warned) == 1 and says in warned[0] and str(journal) in warned[0], warned
    assert len(warned[0]) < len(str(journal)) + 160, warned  # a long value is cut


def _tampered(journal, op_code, **change):
    """``journal`` with trial 0's line of ``op_code`` rewritten by hand: ``change``d."""
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    line = next(x for x in lines if x["op_code"] == op_code and x.get("trial_id") == 0)
    line.update(change)
    journal.write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.mark.parametrize("op_code, change, says", [
    (6, {"values": ["0.99"]}, "its score '0.99' is not a number"),
    (6, {"values": [10 ** 400]}, "its score 1" + "0" * 36 + "... is not a fraction"),
    (8, {"user_attr": {"values": {"trainer.learning_rate": "0.00353"}}},
     "trainer.learning_rate='0.00353' is not a number"),
    (8, {"trial_id": 1}, "it has no values"),
    (5, {"param_value_internal": -1.0}, "trainer.learning_rate=-1.0 is outside the searched"),
], ids=["score text", "score of 401 digits", "value text", "values moved", "param negative"])
def test_a_trial_left_out_of_a_tampered_journal_never_reaches_the_search(tmp_path, caplog,
                                                                         op_code, change, says):
    """A journal line of the sweep's search, tampered with: its trial is said once, in
    one short line, and left out of the budget, the choice and the sampler's proposals
    (whose sort of the scores would raise on a text one), so the search goes on."""
    protocol = Protocol(params=("trainer.learning_rate",), spread=10, trials=2, sampler_seed=0,
                        search_seed=1000, epochs=None)
    journal = tmp_path / "journal.log"
    _search(journal, protocol)
    _tampered(journal, op_code, **change)
    with caplog.at_level("WARNING"):
        assert len(_search(journal, protocol)) == 1  # trial 0 no longer counts: one more
        search = Search(journal, protocol)
        assert search.used("a", RANGES) == 2 and search.best("a", RANGES)[0] != 0
        assert search.progress("a", RANGES)[0] == 2
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 2 and len(set(warned)) == 1, warned  # one line per Search
    assert f"trial 0 of study a is left out: {says}" in warned[0], warned
    assert len(warned[0]) < len(str(journal)) + 160, warned


def test_the_chosen_trial_is_the_best_whose_record_agrees(tmp_path):
    protocol = Protocol(params=("trainer.learning_rate",), spread=10, trials=4, sampler_seed=0,
                        search_seed=1000, epochs=None)
    journal = tmp_path / "journal.log"
    _search(journal, protocol)
    search = Search(journal, protocol)
    ranked = sorted(search._trials("a", RANGES), key=lambda t: -t.value)
    refused = {ranked[0].number}
    number, _, score = search.best("a", RANGES, agrees=lambda n, v, s: n not in refused)
    assert (number, score) == (ranked[1].number, ranked[1].value)
    assert search.best("a", RANGES, agrees=lambda n, v, s: False) is None


@pytest.mark.parametrize("at", [2, None], ids=["in the middle", "as the last line"])
@pytest.mark.parametrize("damage", [b'{"op_code": 8, "trial_id"\n', b"\xff\xfe\x00binary\n"],
                         ids=["a malformed line", "binary content"])
def test_a_journal_that_cannot_be_parsed_is_one_line(tmp_path, damage, at):
    """A whole line that is not Optuna's, even the last (which Optuna would skip, then
    write after): refused in one line, before anything is written."""
    protocol = Protocol(params=("trainer.learning_rate",), spread=10, trials=2, sampler_seed=0,
                        search_seed=1000, epochs=None)
    journal = tmp_path / "journal.log"
    _search(journal, protocol)
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join([*lines[:at], damage, *lines[at:]] if at else [*lines, damage]))
    damaged = journal.read_bytes()
    with pytest.raises(ValueError) as caught:  # Hydra's plugin scan may load the module anew
        Search(journal, protocol)
    assert type(caught.value).__name__ == DamagedJournal.__name__
    assert str(journal) in str(caught.value) and "move it aside" in str(caught.value)
    assert "\n" not in str(caught.value) and journal.read_bytes() == damaged


def test_a_last_line_cut_short_by_a_kill_is_cut_off_and_the_search_resumes(tmp_path, caplog):
    """A kill while Optuna appends a line (here trial 1's score) leaves it without its
    newline: the estimate reads past it, writing nothing; the search cuts it off, in
    one line, and goes on from the complete lines, trial 1 in flight (else Optuna would
    append onto it, and the journal would not be read again)."""
    protocol = Protocol(params=("trainer.learning_rate",), spread=10, trials=3, sampler_seed=0,
                        search_seed=1000, epochs=None)
    journal = tmp_path / "journal.log"
    _search(journal, protocol, trials=2)
    whole = journal.read_bytes()
    os.truncate(journal, len(whole) - 40)  # as `truncate -s -40` leaves it
    complete = whole[:whole.rstrip(b"\n").rfind(b"\n") + 1]
    with caplog.at_level("WARNING"):
        assert Search(journal, protocol, reading=True).progress("a", RANGES)[0] == 1
        assert journal.read_bytes() == whole[:-40] and not caplog.records
        assert [number for number, _ in _search(journal, protocol)] == [1, 2]
    assert journal.read_bytes().startswith(complete) and journal.read_bytes().endswith(b"\n")
    assert Search(journal, protocol).used("a", RANGES) == 3
    (line,) = [r.getMessage() for r in caplog.records]
    dropped = len(whole) - 40 - len(complete)
    assert str(journal) in line and f"cut short (a stop while it was written): dropped " \
        f"{dropped} bytes, b'{{\"op_code\":6," in line, line


def test_two_keys_are_searched_together_each_in_its_own_range(tmp_path):
    """tune=learning_rate_weight_decay: both keys centred on the preset's values, each
    proposal inside both ranges, both carried to the trial's overrides and record."""
    tune = ["experiment=smoke", "tune=learning_rate_weight_decay", "trainer.weight_decay=0.01"]
    protocol = Protocol.of(compose_config(tune)["tune"])
    (study,) = plan(protocol, [["spt=true", "seed=0"]], lambda o: compose_config([*tune, *o]))
    assert study.centre == {"trainer.learning_rate": 0.003, "trainer.weight_decay": 0.01}
    ranges = study.ranges
    assert ranges["trainer.weight_decay"] == pytest.approx((0.001, 0.1))
    search = Search(tmp_path / "journal.log", protocol)
    drawn = []
    for _ in range(4):
        number, values = search.next_trial(study.id, ranges)
        assert set(values) == set(ranges)
        assert all(low <= values[key] <= high for key, (low, high) in ranges.items())
        drawn.append(values)
        search.tell(study.id, number, _objective(values))
    assert len({v["trainer.weight_decay"] for v in drawn}) == 4  # drawn, not held at the centre
    trial = trial_overrides(study, 0, drawn[0])
    entry = tuning_entry(compose_config([*tune, *trial]))
    assert entry["values"] == drawn[0]
    trainer = compose_config([*tune, *trial])["trainer"]
    assert (trainer["learning_rate"], trainer["weight_decay"]) == \
        (drawn[0]["trainer.learning_rate"], drawn[0]["trainer.weight_decay"])


# --- end to end: the command, a kill, a second process, the report ----------------------

def _digits_folder(root, corrupt_test: bool):
    """The real digits as an image folder: train/ and test/ by class; with
    ``corrupt_test`` every test image sits in the wrong class."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images * (255 / 16)).round().astype(np.uint8)
    for i, (image, label) in enumerate(zip(images, digits.target)):
        split = "test" if i % 5 == 0 else "train"
        if split == "test" and corrupt_test:
            label = (label + 1) % 10
        folder = root / split / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(folder / f"{i}.png")
    return root


def _tuned_args(results, data, *extra, variants="spt=true,false"):
    return ["-m", variants, "seed=0", "experiment=smoke", "tune=learning_rate",
            "tune.trials=2", "tune.epochs=1", "trainer.epochs=2", "trainer.verbose=0",
            "trainer.save_model=false",
            "dataset=image_folder", f"dataset.path={data}", "dataset.image_size=8",
            "dataset.channels=1", "diagnostics.enabled=false", "wandb.mode=disabled",
            f"results_dir={results}", *extra]


def _records(root):
    from ablation.runs.record import find_records, read_record

    return [(p.parent, read_record(p)) for p in find_records(root)]


def _chosen(root):
    """Each variant's final runs' learning rate, from the final records."""
    return {r["variant"]: r["config"]["trainer"]["learning_rate"]
            for _, r in _records(root) if r["role"] == "final"}


@pytest.mark.slow
def test_a_tuned_sweep_chooses_on_validation_resumes_after_a_kill_and_reports_both(tmp_path):
    clean = _digits_folder(tmp_path / "clean", corrupt_test=False)
    args = _tuned_args(tmp_path / "a", clean)
    journal = tmp_path / "a" / "smoke" / TUNING_FOLDER / JOURNAL_FILE
    proc = subprocess.Popen([sys.executable, "run_sweep.py", *suite_defaults(args)], cwd=ROOT,
                            env=cli_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # until two trials are done and told
        done = [r for _, r in _records(tmp_path / "a") if r["status"] == "completed"] \
            if (tmp_path / "a").exists() else []
        if len(done) >= 2 and journal.exists() and journal.read_text().count('"state":1,') >= 2:
            break
        assert proc.poll() is None, "the sweep ended before it could be killed"
        time.sleep(0.05)
    second = run_cli(*args)  # a second process while the first holds the search
    assert second.returncode == 2, second.stderr[-2000:]
    assert "is being tuned by another process" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {str(folder): r["finished_at"] for folder, r in _records(tmp_path / "a")
              if r["status"] == "completed"}

    resumed = run_cli(*args, "report.plots=true")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    records = _records(tmp_path / "a")
    for folder, record in records:  # finished trials were not run again
        if str(folder) in before:
            assert record["finished_at"] == before[str(folder)]
    trials = [r for _, r in records if r["role"] == "trial"]
    finals = [r for _, r in records if r["role"] == "final"]
    assert all(r["status"] == "completed" for _, r in records)
    # the same budget for each variant, trained with the search's seed and epochs
    assert sorted(pd.Series([r["variant"] for r in trials]).value_counts().tolist()) == [2, 2]
    assert {r["seed"] for r in trials} == {1000} and {len(r["history"]) for r in trials} == {1}
    assert sorted((r["variant"], r["seed"]) for r in finals) == [("lsa+temp", 0),
                                                                 ("spt+lsa+temp", 0)]
    best = {}
    for r in sorted(trials, key=lambda r: r["tuning"]["trial"]):
        score = r["metrics"]["final_val_top1"]
        if r["variant"] not in best or score > best[r["variant"]][0]:
            best[r["variant"]] = (score, r["config"]["trainer"]["learning_rate"])
    assert _chosen(tmp_path / "a") == {v: lr for v, (_, lr) in best.items()}

    # the report: a tuned block, each variant's values and best validation top-1 from the trials
    table = pd.read_csv(tmp_path / "a" / "smoke" / "comparison.csv")
    assert table["setting"].str.startswith("tuned per variant").all()
    for _, row in table[table["n"] > 0].iterrows():  # the paper's ViT and SPT: not swept
        variant = "spt+lsa+temp" if row["spt"] else "lsa+temp"
        assert json.loads(row["tuned_values"]) == {"trainer.learning_rate": best[variant][1]}
        assert row["tuned_val_top1"] == pytest.approx(100 * best[variant][0])
        assert row["tuned_trials"] == 2 and row["n"] == 1
    markdown = (tmp_path / "a" / "smoke" / "comparison.md").read_text()
    assert "Tuned values" in markdown and "validation split only" in markdown
    assert (tmp_path / "a" / "smoke" / "tuning.png").is_file()

    # unbroken, on data whose test labels are all wrong: the same choice for the plain
    # LSA variant (its own study: every study's search runs on its own results)
    corrupt = _digits_folder(tmp_path / "corrupt", corrupt_test=True)
    other = run_cli(*_tuned_args(tmp_path / "b", corrupt, variants="spt=false"))
    assert other.returncode == 0, other.stderr[-3000:]
    assert _chosen(tmp_path / "b") == {"lsa+temp": _chosen(tmp_path / "a")["lsa+temp"]}
    scores = lambda root: sorted((r["tuning"]["trial"], r["metrics"]["final_val_top1"])
                                 for _, r in _records(root)
                                 if r["role"] == "trial" and r["variant"] == "lsa+temp")
    assert scores(tmp_path / "b") == scores(tmp_path / "a")
    test_top1 = lambda root: [r["metrics"]["test_top1"]
                              for _, r in sorted(_records(root), key=lambda x: x[0].name)
                              if r["role"] == "final"]
    assert max(test_top1(tmp_path / "b")) < 0.3 < min(test_top1(tmp_path / "a"))
    shutil.rmtree(tmp_path / "corrupt")

    # shared-recipe runs in the same folder: their own block beside the tuned one
    shared = run_cli(*[a for a in _tuned_args(tmp_path / "a", clean, variants="spt=false")
                       if not a.startswith("tune")])
    assert shared.returncode == 0, shared.stderr[-3000:]
    table = pd.read_csv(tmp_path / "a" / "smoke" / "comparison.csv")
    assert sorted(table.groupby("setting")["n"].sum().items()) == [
        ("shared recipe, trainer.learning_rate=0.003", 1),
        ("tuned per variant: trainer.learning_rate", 2)]


@pytest.mark.parametrize("planted", ["fifo journal", "linked journal", "linked folder"])
def test_a_link_or_fifo_where_the_search_keeps_its_files_is_refused(tmp_path, planted):
    """Nothing trains, nothing outside is written, and no open waits on a FIFO."""
    from tests.helpers.commands import run_in_process
    from tests.helpers.refusals import assert_refused

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "journal.log").write_text("mine\n")
    tuning = tmp_path / "results" / "smoke" / TUNING_FOLDER
    if planted == "linked folder":
        tuning.parent.mkdir(parents=True)
        tuning.symlink_to(outside)
        says = "is a symbolic link where the suite keeps its own folder"
    else:
        tuning.mkdir(parents=True)
        if planted == "fifo journal":
            os.mkfifo(tuning / JOURNAL_FILE)
            says = "is a FIFO (named pipe) where the suite keeps its own file"
        else:
            (tuning / JOURNAL_FILE).symlink_to(outside / "journal.log")
            says = "is a symbolic link where the suite keeps its own file"
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    result = run_in_process("-m", "spt=true,false", "experiment=smoke", "tune=learning_rate",
                            f"results_dir={tmp_path / 'results'}", "estimate=false",
                            "wandb.mode=disabled")
    assert_refused(result, says, tmp_path, before=before)
    assert (outside / "journal.log").read_text() == "mine\n"
    assert sorted(p.name for p in outside.iterdir()) == ["journal.log"]


def test_a_single_run_with_tune_is_refused(tmp_path):
    from tests.helpers.commands import run_in_process
    from tests.helpers.refusals import assert_refused

    result = run_in_process("experiment=smoke", "tune=learning_rate",
                            f"results_dir={tmp_path / 'results'}", "wandb.mode=disabled")
    assert_refused(result, "tune=... searches each variant over many jobs", tmp_path)


@pytest.mark.parametrize("args, says", [
    (["tune.trials=2,4"], "tune.trials cannot be swept (one search protocol per sweep)"),
    (["trainer.label_smoothing=0.1", "tune.params=[trainer.label_smoothing]"],
     "tune.params: trainer.label_smoothing is searched in [0.01, 1]"),
    (["tune.params=[trainer.batch_size]"], "tune.params: trainer.batch_size is searched in"),
    (["trainer.protocol=official"], "needs a validation split to choose on"),
    (["seed=0,1000"], "tune.search_seed=1000 is also a final seed"),
], ids=["swept protocol", "range past a bound", "whole number", "no validation", "seed"])
def test_the_command_refuses_an_impossible_search_before_anything_runs(tmp_path, args, says):
    from tests.helpers.commands import run_in_process
    from tests.helpers.refusals import assert_refused

    result = run_in_process("-m", "spt=true,false", "experiment=smoke", "tune=learning_rate",
                            *args, f"results_dir={tmp_path / 'results'}", "wandb.mode=disabled")
    assert_refused(result, says, tmp_path)


# --- the budget: a failed trial is a trial ------------------------------------------------

def _trial_outcomes(fails: set, limit: int = 20):
    """A job in place of :func:`ablation.sweep.cli.job` that trains nothing and leaves
    what a job leaves: its record (completed with the stand-in objective at the learning
    rate it was given, or failed for the (variant, trial) pairs in ``fails``, as a
    diverged run's) and returns its outcome for the sweep's end. The search reads nothing
    else of a job. More than ``limit`` jobs raise: a search that never ends."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from ablation.config import switches, variant_name
    from ablation.job.records import base_record, write_failure
    from ablation.runs.record import write_record
    from ablation.train.fit import TrainingDiverged
    from hydra_plugins.vit_ablation.outcomes import outcome

    launched = []

    def job(cfg):
        output_dir = HydraConfig.get().runtime.output_dir
        record_path = str(Path(output_dir) / "run.json")
        config = OmegaConf.to_container(cfg, resolve=True)
        launched.append(config)
        if len(launched) > limit:
            raise RuntimeError(f"{len(launched)} jobs launched for a budget that allows fewer")
        tune = config["tune"]
        if tune["role"] == "trial" and (variant_name(switches(config)), tune["trial"]) in fails:
            error = TrainingDiverged("training loss became nan at epoch 1")
            write_failure(cfg, output_dir, error)
            return outcome("failed", record_path, detail=f"TrainingDiverged: {error}")
        value = float(_objective({"trainer.learning_rate": config["trainer"]["learning_rate"]}))
        record = base_record(config)
        record.update(status="completed", epochs_completed=1,
                      metrics={"test_top1": 0.5, "test_top5": 0.9, "final_val_top1": value},
                      history=[{"epoch": 1, "val/top1": value}])
        write_record(output_dir, record)
        return outcome("completed", record_path, top1=0.5, top5=0.9)

    return job, launched


@pytest.mark.slow
def test_a_failed_trial_counts_against_its_variants_budget(tmp_path, monkeypatch):
    """Every variant gets the same number of trials attempted, failed ones included: the
    variant whose first trial diverges runs two trials, as the other does, trains its
    final run at the one that completed, and the sweep ends with exit code 0 (a diverged
    trial is a search outcome, not a failed run of the sweep). A search that did not
    count the failed trial would run three; one that counted it twice, one. The command,
    Hydra's launcher, the suite's sweeper, the journal and the sweep's end all run as they
    do; only the training inside each job is left out (:func:`_trial_outcomes`)."""
    from ablation.sweep import cli
    from tests.helpers.commands import run_in_process

    job, launched = _trial_outcomes({("spt+lsa+temp", 0)})
    monkeypatch.setattr(cli, "job", job)
    result = run_in_process("-m", "spt=true,false", "seed=0", "experiment=smoke",
                            "tune=learning_rate", "tune.trials=2", "estimate=false",
                            "report.after_sweep=false", "wandb.mode=disabled",
                            "gpu.jobs_at_once=1", f"results_dir={tmp_path}")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    trials = [(c["tune"]["study"], c["spt"], c["tune"]["trial"]) for c in launched
              if c["tune"]["role"] == "trial"]
    per_variant = pd.Series([spt for _, spt, _ in trials]).value_counts().to_dict()
    assert per_variant == {True: 2, False: 2}
    assert len(set(trials)) == len(trials)                # no trial launched twice
    search = Search(tmp_path / "smoke" / TUNING_FOLDER / JOURNAL_FILE,
                    Protocol.of(launched[0]["tune"]))
    for study in {s for s, _, _ in trials}:
        first = search.storage.get_all_trials(search.storage.get_study_id_from_name(study))[0]
        ranges = {key: (d.low, d.high) for key, d in first.distributions.items()}
        assert search.used(study, ranges) == 2
    records = {(r["switches"]["spt"], r["role"], (r["tuning"] or {}).get("trial")): r
               for _, r in _records(tmp_path)}
    assert records[(True, "trial", 0)]["status"] == "failed"
    finals = {spt: r for (spt, role, _), r in records.items() if role == "final"}
    assert sorted(finals) == [False, True]
    for spt, final in finals.items():   # the best of the trials that completed
        done = [r for (s, role, _), r in records.items()
                if s == spt and role == "trial" and r["status"] == "completed"]
        assert len(done) == (1 if spt else 2)
        best = max(done, key=lambda r: r["metrics"]["final_val_top1"])
        assert final["config"]["trainer"]["learning_rate"] == \
            best["config"]["trainer"]["learning_rate"]


@pytest.mark.parametrize("centre", [0.001, 7e-4, 0.01, 2e-5, 0.003])
def test_a_proposal_rounded_at_the_edge_of_its_range_is_believed(centre):
    """A value is trained rounded to three significant digits, which can put a draw
    at the range's edge just outside it (0.000333 below 0.001 / 3): still believed."""
    import optuna
    from optuna.distributions import FloatDistribution

    from ablation.config.tuning import rounded
    from hydra_plugins.vit_ablation.search import trial_problem

    low, high = centre / 3, centre * 3
    ranges = {"trainer.learning_rate": (low, high)}
    for value in (rounded(low), rounded(high), rounded(low * 1.0004), rounded(high / 1.0004)):
        trial = optuna.trial.create_trial(
            params={"trainer.learning_rate": min(max(value, low), high)},
            distributions={"trainer.learning_rate": FloatDistribution(low, high, log=True)},
            value=0.5, user_attrs={"values": {"trainer.learning_rate": value}})
        assert trial_problem(trial, ranges) is None, value
    assert trial_problem(optuna.trial.create_trial(
        params={"trainer.learning_rate": high}, value=0.5,
        distributions={"trainer.learning_rate": FloatDistribution(low, high, log=True)},
        user_attrs={"values": {"trainer.learning_rate": high * 1.02}}), ranges) is not None
