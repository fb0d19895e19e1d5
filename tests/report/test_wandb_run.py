"""The report's W&B run: one summary key per block and variant, as the tables have them.

Blocks that share a dataset, model and variant names (a shared recipe beside a tuned
one, two backends, two values of a swept key) must each keep their own numbers in the
report run's summary: read back here with W&B's own ``wandb leet inspect``.

Reporting again updates the one report run; its id differs between folders of one
group; a failing W&B step never crashes the report."""
import logging

import pytest

from ablation.report import write_report
from tests.helpers.records import BASE_CONFIG, record


TOP1 = {"tuned": (0.61, 0.63), "shared": (0.50, 0.52), "jax": (0.55, 0.57)}


def _tuning(study, trial, lr):
    return {"study": study, "trial": trial, "values": {"trainer.learning_rate": lr},
            "objective": "final_val_top1", "trials": 2, "params": ["trainer.learning_rate"],
            "spread": 10.0, "sampler_seed": 0, "search_seed": 1000, "epochs": 2}


def _colliding_blocks(root):
    """The plain ViT and SL-ViT, two seeds each, in three blocks of one dataset x model:
    the shared recipe, the same on JAX, and each variant tuned (with its trials)."""
    def config(lr):
        return {**BASE_CONFIG, "trainer": {**BASE_CONFIG["trainer"], "learning_rate": lr}}

    for on in (False, True):
        bump = 0.05 if on else 0.0
        for seed in (0, 1):
            record(root, on, on, on, seed, TOP1["shared"][seed] + bump, name=f"shared-{on}-{seed}")
            record(root, on, on, on, seed, TOP1["jax"][seed] + bump, name=f"jax-{on}-{seed}",
                   extra={"environment": {"backend": "jax"}})
            record(root, on, on, on, seed, TOP1["tuned"][seed] + bump, name=f"tuned-{on}-{seed}",
                   config=config(0.003),
                   extra={"role": "final", "tuning": _tuning(f"study-{on}", None, 0.003)})
        for number, (lr, score) in enumerate([(0.001, 0.8), (0.003, 0.9)]):
            record(root, on, on, on, 1000, 0.5, name=f"trial-{on}-{number}", config=config(lr),
                   extra={"role": "trial", "tuning": _tuning(f"study-{on}", number, lr),
                          "metrics": {"test_top1": 0.99, "test_top5": 1.0,
                                      "final_val_top1": score}})


def test_each_block_keeps_its_own_summary_in_the_report_run(tmp_path, wandb_cli):
    from ablation.report import write_report
    from tests.helpers.wandb_runs import wandb_inspect

    _colliding_blocks(tmp_path)
    report = write_report(tmp_path, wandb_settings={"mode": "offline"}, make_plots=False)
    table = report.table[report.table["status"] == "ok"]
    assert table["setting"].nunique() == 3  # the three blocks, variant names shared
    vit = table[table["variant"] == "ViT"].set_index("setting")["top1_mean"]
    assert sorted(vit.round(2)) == [51.0, 56.0, 62.0]

    (run_dir,) = tmp_path.glob("wandb/offline-run-*")
    summary = wandb_inspect(wandb_cli, run_dir)["summary"]
    written = {k: v for k, v in summary.items() if k.endswith(("/top1", "/top5"))}
    assert len(written) == 2 * len(table)  # one key per block, variant and metric
    for _, row in table.iterrows():  # each under its whole block: none overwrote another
        prefix = f"cifar10/paper/holdout/{row['setting']}/{row['variant']}"
        assert written[f"{prefix}/top1"] == pytest.approx(row["top1_mean"]), prefix
        assert written[f"{prefix}/top5"] == pytest.approx(row["top5_mean"]), prefix


def test_summary_keys_name_the_whole_block_and_cannot_collide():
    from ablation.report.wandb_run import NO_SETTING, summary_key

    row = {"dataset": "digits", "model": "tiny", "protocol": "holdout", "variant": "ViT"}
    assert summary_key({**row, "setting": ""}, "top1") == \
        f"digits/tiny/holdout/{NO_SETTING}/ViT/top1"
    assert summary_key({**row, "setting": "backend=jax"}, "top5") == \
        "digits/tiny/holdout/backend=jax/ViT/top5"
    assert summary_key({**row, "protocol": "official", "setting": ""}, "top1") != \
        summary_key({**row, "setting": ""}, "top1")
    # a "/" inside a part is escaped: it cannot move a boundary between parts
    a = summary_key({**row, "setting": "dataset.path=a/ViT"}, "top1")
    b = summary_key({**row, "setting": "dataset.path=a", "variant": "ViT/ViT"}, "top1")
    assert a != b and a.count("/") == b.count("/") == 5
    assert summary_key({**row, "setting": "x=%2F"}, "top1") != \
        summary_key({**row, "setting": "x=/"}, "top1")


@pytest.mark.slow   # slower than a fast-lane test
def test_reporting_again_updates_the_one_wandb_report_run(four_by_three, wandb_cli):
    from tests.helpers.wandb_runs import wandb_inspect

    first = write_report(four_by_three, wandb_settings={"mode": "offline"}, make_plots=False)
    again = write_report(four_by_three, wandb_settings={"mode": "offline"}, make_plots=False)
    assert again.wandb["id"] == first.wandb["id"]  # one report run per group
    (run_dir,) = four_by_three.glob("wandb/offline-run-*")  # one left to `wandb sync`
    assert run_dir.name.endswith(again.wandb["id"])
    (earlier,) = four_by_three.glob(".replaced/*/wandb/offline-run-*")  # set aside
    # its folder name may equal the new run's: W&B names run folders by the second
    assert earlier.name.endswith(first.wandb["id"])
    # with the files it reported beside: one generation set aside per report
    (generation,) = four_by_three.glob(".replaced/report-*")
    assert earlier.parent.parent == generation and (generation / "comparison.md").is_file()
    seen = wandb_inspect(wandb_cli, run_dir)
    assert seen["job_type"] == "report" and seen["group"] == "g" and seen["state"] == "finished"


def test_report_run_ids_differ_between_folders_of_one_group(tmp_path):
    from ablation.report.wandb_run import report_run_id

    a, b = tmp_path / "results_a" / "smoke", tmp_path / "results_b" / "smoke"
    assert report_run_id("smoke", a) != report_run_id("smoke", b)
    assert report_run_id("smoke", a) == report_run_id("smoke", tmp_path / "results_a" / "." / "smoke")
    assert report_run_id("smoke", a) != report_run_id("other", a)


def test_a_failing_wandb_step_never_crashes_the_report(tmp_path, caplog):
    for spt, lsa in ((False, False), (True, True)):
        record(tmp_path, spt, lsa, lsa, 0, 0.5)
    with caplog.at_level(logging.WARNING):
        report = write_report(tmp_path, make_plots=False, wandb_settings={"mode": "bogus"})
    assert report.wandb is None and (tmp_path / "comparison.md").exists()
    lines = [r.getMessage() for r in caplog.records if "W&B report run not logged" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]


@pytest.mark.parametrize("where", ["a job's folder", "a linked wandb folder"])
def test_the_report_run_never_goes_into_a_jobs_wandb_or_through_a_link(tmp_path, caplog, where):
    """A job's wandb/ holds the job's run (``wandb sync`` would upload the report as
    the job); a linked one would write elsewhere: one line, the report files written."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if where == "a job's folder":  # the report of one job, written beside it
        target = out = record(tmp_path / "sweep", True, True, True, 0, 0.5, name="job")
        (out / "wandb").mkdir()
    else:
        for spt, lsa in ((False, False), (True, True)):
            record(tmp_path / "sweep", spt, lsa, lsa, 0, 0.5)
        target = out = tmp_path / "sweep"
        (out / "wandb").symlink_to(elsewhere)
    with caplog.at_level(logging.WARNING):
        report = write_report(target, out_dir=out, make_plots=False,
                              wandb_settings={"mode": "offline"})
    assert report.wandb is None and (out / "comparison.md").exists()
    lines = [r.getMessage() for r in caplog.records if "W&B report run not logged" in r.getMessage()]
    assert len(lines) == 1 and ("job's folder" in lines[0] or "symbolic link" in lines[0])
    assert list(elsewhere.iterdir()) == [] and not list(out.glob("wandb/*run-*"))
