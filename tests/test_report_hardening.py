"""The reporter against confounded designs, hostile records and concurrent reports:
hand-written records, in process."""
import logging
import os
import re
import stat

import pytest

from ablation.report import factorial, load_runs, write_report
from tests.helpers.records import record


def test_effects_confounded_with_the_seed_are_left_out_with_a_note(tmp_path, caplog):
    # ViT only with seed 1, the other three only with seed 0: the switches cannot be
    # told apart from the seed, so OLS with seed blocks has no unique answer.
    for (spt, lsa), (top1, seed) in {(False, False): (0.5017, 1), (True, False): (0.5073, 0),
                                     (False, True): (0.5017, 0), (True, True): (0.5329, 0)}.items():
        record(tmp_path, spt, lsa, lsa, seed, top1)
    with caplog.at_level(logging.WARNING):
        report = write_report(tmp_path, make_plots=False)
    assert report.effects.empty
    assert not (tmp_path / "factorial_effects.csv").exists()
    assert sum("factorial effects left out" in r.getMessage() for r in caplog.records) == 1
    for name in ("comparison.md", "comparison.html", "comparison.tex"):
        assert "Factorial effects left out" in (tmp_path / name).read_text()


def test_only_seeds_with_the_full_factorial_are_fitted(tmp_path):
    # seed 0 holds all four variants; seed 1 lacks SPT (its ViT is far off): the
    # effects are seed 0's exact ones, fitted on one seed.
    seed0 = {(False, False): 0.50, (True, False): 0.53, (False, True): 0.51, (True, True): 0.58}
    for (spt, lsa), top1 in seed0.items():
        record(tmp_path, spt, lsa, lsa, 0, top1)
    for (spt, lsa), top1 in {(False, False): 0.10, (False, True): 0.52, (True, True): 0.59}.items():
        record(tmp_path, spt, lsa, lsa, 1, top1)
    effects = factorial(load_runs(tmp_path)).set_index("term")
    y = {k: 100 * v for k, v in seed0.items()}
    spt = (y[True, False] + y[True, True] - y[False, False] - y[False, True]) / 2
    assert effects.loc["SPT", "top1_effect"] == pytest.approx(spt)
    assert set(effects["seeds"]) == {1}


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield 0o640
    os.umask(old)


def _modes(folder):
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*") if p.is_file()}


def test_every_output_gets_the_umask_mode(tmp_path, umask_027):
    # a full factorial with locality diagnostics: every kind of output the reporter writes
    diag = {"probe_images": 4, "layers": [], "summary": {"mean_distance_px": 5.0,
                                                         "normalized_entropy": 0.5}}
    for spt, lsa in ((False, False), (True, False), (False, True), (True, True)):
        record(tmp_path, spt, lsa, lsa, 0, 0.5 + 0.01 * spt, extra={"diagnostics": diag})
    out = tmp_path / "out"
    write_report(tmp_path, out_dir=out, make_plots=False)
    modes = _modes(out)
    assert {"comparison.md", "comparison.csv", "comparison.tex", "comparison.html",
            "factorial_effects.csv", "locality.csv", "locality_effects.csv"} <= set(modes)
    assert set(modes.values()) == {umask_027}, modes
    assert set(_modes(tmp_path / "111-s0-cifar10-paper").values()) == {umask_027}


def test_checkpoint_files_get_the_umask_mode(tmp_path, umask_027):
    import keras

    from ablation.train.checkpoint import EpochCheckpoint

    class Metrics:
        def state(self):
            return {}

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    callback = EpochCheckpoint(tmp_path / "checkpoint", Metrics(), {})
    callback.set_model(model)
    callback.on_epoch_end(0, {"loss": 1.0})
    modes = _modes(tmp_path / "checkpoint")
    assert set(modes) == {"model-1.keras", "state-1.json", "state.json"}
    assert set(modes.values()) == {umask_027}, modes


def test_deeply_nested_json_is_skipped_with_one_warning(tmp_path, caplog):
    record(tmp_path, False, False, False, 0, 0.5)
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "run.json").write_text("[" * 200_000)
    with caplog.at_level(logging.WARNING):
        runs = load_runs(tmp_path)
    assert len(runs) == 1
    named = [r.getMessage() for r in caplog.records if "deep/run.json" in r.getMessage()]
    assert len(named) == 1 and "nested too deeply" in named[0]


def test_a_failing_wandb_step_never_crashes_the_report(tmp_path, caplog):
    for spt, lsa in ((False, False), (True, True)):
        record(tmp_path, spt, lsa, lsa, 0, 0.5)
    with caplog.at_level(logging.WARNING):
        report = write_report(tmp_path, make_plots=False, wandb_settings={"mode": "bogus"})
    assert report.wandb is None and (tmp_path / "comparison.md").exists()
    lines = [r.getMessage() for r in caplog.records if "W&B report run not logged" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]


def test_exact_zero_gaps_and_effects_are_zero_in_every_csv(tmp_path):
    # SPT gains 7.31 pp with seed 0 and loses 7.31 pp with seed 1: the mean gap is
    # exactly zero, yet 100 * (a - c) + 100 * (b - d) is -3.55e-15 in floats.
    diag = {"probe_images": 4, "layers": [],
            "summary": {"mean_distance_px": 3.1, "normalized_entropy": 0.5}}
    for seed, (vit, spt) in enumerate(((0.7531, 0.5839), (0.4378, 0.6070))):
        for lsa in (False, True):
            record(tmp_path, False, lsa, lsa, seed, vit, top5=0.95, extra={"diagnostics": diag})
            record(tmp_path, True, lsa, lsa, seed, spt, top5=0.95, extra={"diagnostics": diag})
    report = write_report(tmp_path, make_plots=False)
    spt = report.table.set_index("variant").loc["SPT"]
    assert spt["d_top1"] == 0.0 and spt["d_top5"] == 0.0
    assert (report.effects["top5_effect"] == 0.0).all()
    for name in ("comparison.csv", "factorial_effects.csv", "locality.csv",
                 "locality_effects.csv"):
        text = (tmp_path / name).read_text()
        assert not re.search(r"\de-\d", text), (name, re.findall(r"[-\d.]+e-\d+", text))


def test_report_run_ids_differ_between_folders_of_one_group(tmp_path):
    from ablation.report.wandb_run import report_run_id

    a, b = tmp_path / "results_a" / "smoke", tmp_path / "results_b" / "smoke"
    assert report_run_id("smoke", a) != report_run_id("smoke", b)
    assert report_run_id("smoke", a) == report_run_id("smoke", tmp_path / "results_a" / "." / "smoke")
    assert report_run_id("smoke", a) != report_run_id("other", a)


def test_reports_of_one_folder_wait_for_each_other(tmp_path):
    import threading
    import time

    from ablation.runs.lock import REPORT_LOCK_FILE, job_lock
    from ablation.report import ReportError

    for spt, lsa in ((False, False), (True, True)):
        record(tmp_path, spt, lsa, lsa, 0, 0.5)
    held, release = threading.Event(), threading.Event()

    def other_report():  # another report of this folder, in the middle of writing
        with job_lock(tmp_path, name=REPORT_LOCK_FILE):
            held.set()
            release.wait(10)
            time.sleep(0.3)  # still writing: the waiting report must not start yet
            seen_at_release.append((tmp_path / "comparison.md").exists())

    seen_at_release = []
    other = threading.Thread(target=other_report)
    other.start()
    held.wait(10)
    with pytest.raises(ReportError, match="being reported by another process"):
        write_report(tmp_path, make_plots=False, lock_wait_s=0.2)
    assert not (tmp_path / "comparison.md").exists()
    release.set()
    write_report(tmp_path, make_plots=False, lock_wait_s=10)   # waits, then reports
    other.join()
    assert seen_at_release == [False] and (tmp_path / "comparison.md").exists()


def test_the_lock_holder_puts_back_the_hydra_files_a_skipper_overwrote(tmp_path):
    from ablation.job.lifecycle import keep_hydra_files

    hydra = tmp_path / ".hydra"
    hydra.mkdir()
    (hydra / "hydra.yaml").write_text("job: {num: 0}\n")
    (hydra / "config.yaml").write_text("seed: 0\n")
    with keep_hydra_files(tmp_path):
        # a second launch of the same job writes its own before finding the lock taken
        (hydra / "hydra.yaml").write_text("job: {num: 7}\n")
        (hydra / "overrides.yaml").write_text("- seed=0\n")
    assert (hydra / "hydra.yaml").read_text() == "job: {num: 0}\n"
    assert (hydra / "config.yaml").read_text() == "seed: 0\n"
