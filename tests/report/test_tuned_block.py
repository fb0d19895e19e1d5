"""A tuned block in the report (ablation/report/tuned_block.py and the tables): what the
trial records found, trials counted per sweep folder, and the paper's published top-1
beside the best-epoch one."""
from pathlib import Path

import pytest

from ablation.config.compose import compose_config


TRIALS = {False: [(0.001, 0.80), (0.003, 0.84), (0.01, 0.82)],   # (learning rate, val top-1)
          True: [(0.001, 0.86), (0.003, 0.85), (0.01, 0.90)]}


def _tuned_records(root, published=None):
    """The plain ViT and SL-ViT tuned on three trials each, two final seeds each."""
    from tests.helpers.records import BASE_CONFIG, TOP1, record

    def config(lr):
        report = {"report": {"published": published}} if published else {}
        return {**BASE_CONFIG, "trainer": {**BASE_CONFIG["trainer"], "learning_rate": lr},
                **report}

    def entry(study, trial, lr):
        return {"study": study, "trial": trial, "values": {"trainer.learning_rate": lr},
                "objective": "final_val_top1", "trials": 3, "params": ["trainer.learning_rate"],
                "spread": 10.0, "sampler_seed": 0, "search_seed": 1000, "epochs": 2}

    for on in (False, True):
        study = f"study-{int(on)}"
        for number, (lr, score) in enumerate(TRIALS[on]):
            record(root, on, on, on, 1000, 0.5, name=f"{int(on)}-trial{number}", config=config(lr),
                   extra={"role": "trial", "tuning": entry(study, number, lr),
                          "metrics": {"test_top1": 0.99, "test_top5": 1.0,
                                      "final_val_top1": score}})
        chosen = max(TRIALS[on], key=lambda t: t[1])[0]
        for seed in (0, 1):
            record(root, on, on, on, seed, TOP1[(on, on)][seed], name=f"{int(on)}-s{seed}",
                   config=config(chosen),
                   extra={"role": "final", "tuning": entry(study, None, chosen)})


def test_the_tuned_block_says_what_the_trial_records_found(tmp_path):
    from ablation.report import load_runs
    from ablation.report.tables import comparison

    _tuned_records(tmp_path)
    runs = load_runs(tmp_path)
    assert len(runs) == 4 and set(runs["role"]) == {"final"}  # the trials stay out
    table = comparison(runs).set_index("variant")
    assert set(table["setting"]) == {"tuned per variant: trainer.learning_rate"}
    for label, on in (("ViT", False), ("SL-ViT", True)):
        score, lr = max((s, lr) for lr, s in TRIALS[on])
        assert table.loc[label, "tuned_values"] == {"trainer.learning_rate": lr}
        assert table.loc[label, "tuned_val_top1"] == pytest.approx(100 * score)
        assert table.loc[label, "tuned_trials"] == 3 and table.loc[label, "n"] == 2
    # the test metrics of trials (0.99) never reach the table
    assert table.loc["ViT", "top1_mean"] == pytest.approx(51.0)
    assert table["paper_top1"].isna().all()  # not a paper preset


def test_the_best_top1_is_the_chosen_trials_own(tmp_path):
    """A final run's values and the validation top-1 beside them come from one trial:
    a better-scored trial at other values (its record disagreed with the journal and
    was not chosen) never lends its score; values no trial record has show none."""
    import json

    from ablation.report import load_runs
    from ablation.report.tables import comparison

    _tuned_records(tmp_path)
    for folder in tmp_path.glob("1-s*"):  # SL-ViT's finals trained at trial 1's values
        record = json.loads((folder / "run.json").read_text())
        record["tuning"]["values"] = {"trainer.learning_rate": TRIALS[True][1][0]}
        (folder / "run.json").write_text(json.dumps(record))
    for folder in tmp_path.glob("0-s*"):  # the plain ViT's at values no trial has
        record = json.loads((folder / "run.json").read_text())
        record["tuning"]["values"] = {"trainer.learning_rate": 0.005}
        (folder / "run.json").write_text(json.dumps(record))
    table = comparison(load_runs(tmp_path)).set_index("variant")
    assert table.loc["SL-ViT", "tuned_val_top1"] == pytest.approx(100 * TRIALS[True][1][1])
    assert table.loc["ViT", "tuned_values"] == {"trainer.learning_rate": 0.005}
    assert table.loc["ViT", "tuned_val_top1"] != table.loc["ViT", "tuned_val_top1"]  # NaN


def test_two_sweeps_with_the_same_search_are_counted_apart(tmp_path):
    """A report over the parent of two sweep folders that ran the same study: each
    final run's trials are those of its own folder, not both folders' pooled."""
    from ablation.report import load_runs

    _tuned_records(tmp_path / "first")
    _tuned_records(tmp_path / "second")
    for folder in (tmp_path / "second").glob("0-trial*"):  # a worse search in the second
        (folder / "run.json").unlink()
    runs = load_runs(tmp_path)  # the second folder's final runs: the later ones
    assert len(runs) == 4 and all("/second/" in path for path in runs["path"])
    for _, run in runs.iterrows():  # the plain ViT's search left no trial in the second
        plain = Path(run["path"]).parent.name.startswith("0-")
        assert run["tuned_trials"] == (0 if plain else 3) and run["tuned_budget"] == 3


def test_the_paper_presets_put_the_published_top1_beside_the_best_epoch_one(tmp_path):
    from ablation.report import load_runs, write_report
    from tests.helpers.records import BASE_CONFIG, TOP1, record

    published = {"source": "Lee, Lee & Song (2021)", "dataset": "cifar10",
                 "top1": {"paper": {"ViT": 93.58, "SL-ViT": 94.53}, "cait": {"ViT": 1.0}}}
    for protocol in ("official", "holdout"):
        config = {**BASE_CONFIG, "trainer": {**BASE_CONFIG["trainer"], "protocol": protocol},
                  "report": {"published": published}}
        for (spt, lsa), top1 in TOP1.items():
            for seed in (0, 1):
                record(tmp_path / protocol, spt, lsa, lsa, seed, top1[seed], config=config,
                       extra={"metrics": {"test_top1": top1[seed], "test_top5": 0.9,
                                          "best_test_top1": top1[seed] + 0.01,
                                          "best_test_top5": 0.91}})
    report = write_report(tmp_path / "official", make_plots=False)
    table = report.table.set_index("variant")
    assert table.loc["ViT", "paper_top1"] == 93.58 and table.loc["SL-ViT", "paper_top1"] == 94.53
    assert table["paper_top1"].notna().sum() == 2  # SPT and LSA: the paper gives none here
    assert "| Best-epoch top-1 (%, paper's measure) | Paper top-1 (%) |" in report.markdown
    assert "Song (2021)" in report.markdown and "| 93.58 |" in report.markdown
    holdout = write_report(tmp_path / "holdout", make_plots=False)  # not the paper's measure
    assert holdout.table["paper_top1"].isna().all() and "Paper top-1" not in holdout.markdown
    # another model preset's published figure never stands beside this one's
    record(tmp_path / "another", False, False, False, 0, 0.5, config=config, model="pit")
    assert load_runs(tmp_path / "another")["published"].isna().all()
    # nor one published for another dataset (a preset's dataset overridden)
    record(tmp_path / "elsewhere", False, False, False, 0, 0.5, config=config,
           dataset="synthetic")
    assert load_runs(tmp_path / "elsewhere")["published"].isna().all()
    for preset, top1 in (("paper_cifar10", (93.58, 94.53)), ("paper_cifar100", (73.81, 76.92)),
                         ("paper_tiny_imagenet", (57.07, 61.07))):
        published = compose_config([f"experiment={preset}"])["report"]["published"]["top1"]
        assert (published["paper"]["ViT"], published["paper"]["SL-ViT"]) == top1
    cifar100 = compose_config(["experiment=paper_cifar100", "model=cait"])
    assert cifar100["report"]["published"]["top1"]["cait"] == {"ViT": 76.89, "SL-ViT": 80.32}
    assert compose_config(["experiment=smoke"])["report"]["published"] is None
