"""The sweep's estimate before its first job, and the progress line per epoch."""
from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

from ablation.config import compose_config
from ablation.config.settings import names_job_folder
from ablation.runs.record import find_records, read_record
from ablation.sweep import estimate
from ablation.sweep.speed import Speed, earlier_speed
from ablation.runtime.sweep_context import SWEEP_CONTEXT_ENV, SweepContext, current
from ablation.train.progress import eta_seconds, format_duration, prints_lines, progress_line

# CIFAR-100 under the holdout protocol: 45,000 training, 5,000 validation, 10,000 test images.
CIFAR100 = (45_000, 5_000, 10_000)


def seconds(text: str) -> float:
    """``1h52m``, ``3m05s``, ``48m``, ``42s``, ``2d03h`` back to seconds."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+)([dhms])", text)
    assert "".join(n + u for n, u in parts) == text, text
    return sum(int(n) * units[u] for n, u in parts)


# --- the progress line -------------------------------------------------------

@pytest.mark.parametrize("value, shown", [
    (0.4, "0s"), (42, "42s"), (59.6, "1m00s"), (185, "3m05s"), (2880, "48m"),
    (6720, "1h52m"), (47 * 3600 + 59 * 60, "47h59m"), (2 * 86400 + 3 * 3600, "2d03h")])
def test_durations_are_short_and_read_back(value, shown):
    assert format_duration(value) == shown
    assert abs(seconds(shown) - value) <= max(0.02 * value, 0.5)


def test_eta_counts_this_jobs_epochs_and_each_later_jobs_start_up():
    # first epoch 40 s (30 s of it tracing), then 10 s per epoch
    times = [40.0, 10.0, 10.0]
    assert eta_seconds(times, epochs_left_in_job=7) == 70.0
    # two later jobs of 10 epochs: 20 epochs at 10 s, and twice the 30 s start-up
    assert eta_seconds(times, 7, later_epochs=20, later_jobs=2) == 70.0 + 200.0 + 60.0
    assert eta_seconds([25.0], 4) == 100.0  # one epoch: all of it counts per epoch
    with pytest.raises(ValueError):
        eta_seconds([], 3)


def test_progress_line_says_job_epoch_metrics_sweep_share_and_eta():
    line = progress_line("spt+lsa+temp-s0", 13, 50, [40.0] + [38.0] * 12,
                         {"loss": 2.3141, "val_top1": 0.4123}, position=(1, [50] * 8))
    # (50 + 13) / 400 epochs done; 37 epochs of this job and 6 jobs of 50 left at 38 s,
    # and 6 more start-ups of 2 s: 37*38 + 300*38 + 12 = 12,818 s
    assert line == ("[2/8] spt+lsa+temp-s0 epoch 13/50 · loss 2.314 · val top-1 41.2 % · 38s"
                    " · sweep 16 % · ETA 3h33m")
    assert seconds("3h33m") == 12_780 and format_duration(37 * 38 + 300 * 38 + 12) == "3h33m"


def test_a_single_run_has_no_sweep_part_and_official_runs_name_the_test_set():
    line = progress_line("vit-s1", 2, 4, [12.0, 3.0], {"val_top1": 0.5}, None, "test")
    assert line == "vit-s1 epoch 2/4 · test top-1 50.0 % · 3s · ETA 6s"


def test_position_comes_from_the_sweep_context_in_the_environment():
    def position(**fields):
        return current({SWEEP_CONTEXT_ENV: SweepContext(**fields).to_json()}).position()

    assert position(job_epochs=(3, 3, 5), job_num=2) == (2, [3, 3, 5])
    assert position(job_epochs=(3, 3)) is None  # a single run
    assert position(job_epochs=(3, 3), job_num=2) is None
    assert current({}).position() is None


@pytest.mark.parametrize("value", ["", "nonsense", "[1, 2]", '{"job_epochs": "3,3"}',
                                   '{"job_epochs": [3, -1], "job_num": 0}',
                                   '{"job_num": true, "job_epochs": [3]}',
                                   '{"new_folders": "/home"}',
                                   '{"new_folders": [7]}'])
def test_a_value_that_is_not_a_sweep_context_reads_as_none(value):
    assert current({SWEEP_CONTEXT_ENV: value}) == SweepContext()


def test_lines_only_for_auto_and_never_for_explicit_verbosity():
    assert not prints_lines(0) and not prints_lines(1) and not prints_lines(2)
    assert prints_lines("auto")  # pytest's captured stdout is not a terminal


def test_the_callback_prints_one_line_per_epoch(capsys, monkeypatch):
    import keras
    import numpy as np

    from ablation.train.fit import ProgressLine

    monkeypatch.setenv(SWEEP_CONTEXT_ENV, SweepContext(job_epochs=(3, 3), job_num=1).to_json())
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, kernel_initializer="zeros")])
    model.compile(keras.optimizers.SGD(0.0),  # the loss stays log 2
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = np.zeros((8, 4), "float32"), np.zeros((8,), "int64")
    model.fit(x, y, epochs=3, verbose=0, callbacks=[ProgressLine("vit-s0", 3)])
    lines = capsys.readouterr().out.splitlines()
    assert [re.sub(r" · [^·]*s · ", " · T · ", re.sub(r"ETA .*", "ETA", line))
            for line in lines] == [
        "[2/2] vit-s0 epoch 1/3 · loss 0.6931 · T · sweep 67 % · ETA",
        "[2/2] vit-s0 epoch 2/3 · loss 0.6931 · T · sweep 83 % · ETA",
        "[2/2] vit-s0 epoch 3/3 · loss 0.6931 · T · sweep 100 % · ETA"]
    assert lines[-1].endswith("ETA 0s")


# --- the estimate ------------------------------------------------------------

def keras_io_job(tmp_path: Path, *extra: str) -> dict:
    return compose_config(["model=keras_io", "dataset=cifar100", f"results_dir={tmp_path}",
                           *extra])


def test_the_main_command_on_a_cpu_is_said_to_be_long_and_the_faster_paths_named(tmp_path):
    """The README's four-job sweep at 50 training images/s (about what the
    2-core development CPU does): 4 × 50 × 45,000 / 50 s, over 2 hours."""
    jobs = [keras_io_job(tmp_path)] * 4
    speed = Speed(train_images_per_s=50.0, eval_images_per_s=250.0, start_up_s=20.0,
                  source="probe", peak_memory="peak resident memory 6.1 GiB")
    lines = estimate.report_lines(jobs, [(50, *CIFAR100)] * 4, 4, speed, "cpu, tensorflow")
    assert lines[0] == ("sweep: 4 job(s) × 50 epochs × 45,000 training images "
                        "(+ 5,000 evaluated per epoch)")
    # per job: 20 + 10,000/250 + 50 × (45,000/50 + 5,000/250) = 46,060 s
    expected = 4 * (20 + 10_000 / 250 + 50 * (45_000 / 50 + 5_000 / 250))
    assert lines[1].startswith(
        f"estimate: {format_duration(expected)} on this device (cpu, tensorflow; probe: 50.0 "
        f"training images/s, 250 evaluated/s, 20s per job to build and compile"), lines[1]
    assert "peak resident memory 6.1 GiB" in lines[1] and "estimate=false" in lines[1]
    assert "long for a CPU" in lines[2] and "GPU" in lines[2]
    assert "experiment=smoke" in lines[2] and "trainer.epochs" in lines[2]
    on_gpu = estimate.report_lines(jobs, [(50, *CIFAR100)] * 4, 4, speed, "gpu, jax")
    assert len(on_gpu) == 2  # the same figure on a GPU names no faster path
    short = estimate.report_lines(jobs[:1], [(2, *CIFAR100)], 1, speed, "cpu, tensorflow")
    assert len(short) == 2  # under 2 hours on a CPU: no warning


def test_an_earlier_run_here_gives_the_speed_without_a_probe(tmp_path):
    from ablation.job.records import base_record
    from ablation.runs.record import write_record

    job = keras_io_job(tmp_path)
    record = base_record(job)
    record.update(status="completed", run_name="vit-s0", train_images_per_s=50.0,
                  metrics={"test_top1": 0.5, "test_top5": 0.8, "test_loss": 2.0},
                  data={"train": 45_000, "val": 5_000, "test": 10_000},
                  history=[{"epoch": i + 1, "epoch_seconds": s}
                           for i, s in enumerate([950.0, 920.0, 920.0])])
    write_record(tmp_path / "cifar100-keras_io" / "vit-s0", record)
    elsewhere = dict(record, environment={**record["environment"], "host": "elsewhere"})
    write_record(tmp_path / "copied" / "vit-s0", dict(elsewhere, train_images_per_s=5.0))
    assert len(find_records(tmp_path)) == 2
    speed = earlier_speed(job, tmp_path)
    # 920 s an epoch: 900 s training at 50/s, so 5,000 evaluated in 20 s; 30 s of tracing
    assert speed is not None and speed.source == "earlier run vit-s0 here"
    assert (speed.train_images_per_s, speed.eval_images_per_s, speed.start_up_s) == (
        50.0, 250.0, 30.0)
    assert earlier_speed(keras_io_job(tmp_path, "trainer.batch_size=128"), tmp_path) is None


def test_the_estimate_key_is_declared_and_names_no_folder(tmp_path):
    assert compose_config(["experiment=smoke", "estimate=false"])["estimate"] is False
    assert not names_job_folder("estimate")


def test_estimate_false_prints_nothing_and_still_passes_the_epochs_on(tmp_path, capsys,
                                                                      monkeypatch):
    from ablation.runtime.sweep_context import update
    from ablation.sweep.callbacks import SweepStart

    monkeypatch.delenv(SWEEP_CONTEXT_ENV, raising=False)
    sweep = tmp_path / "sweep"
    jobs = [(compose_config(["experiment=smoke", f"results_dir={tmp_path}", "estimate=false",
                             f"trainer.epochs={n}"]), sweep / f"job{n}") for n in (2, 5)]
    SweepStart._check(lambda: jobs, sweep, {})
    estimate.before_sweep(jobs, {"_target_": "hydra._internal.core_plugins.basic_launcher."
                                             "BasicLauncher"})
    assert capsys.readouterr().out == ""
    assert update(job_num=1).position() == (1, [2, 5])  # what the second job's lines read


def test_a_sweep_with_nothing_left_to_train_prints_nothing(tmp_path, capsys):
    """Every job completed here: nothing trains, so nothing is loaded or probed."""
    from ablation.job.records import base_record
    from ablation.runs.record import write_record

    job = compose_config(["experiment=smoke", f"results_dir={tmp_path}"])
    record = base_record(job)
    record.update(status="completed", metrics={"test_top1": 0.9, "test_top5": 1.0,
                                               "test_loss": 0.3})
    write_record(tmp_path / "done", record)
    assert estimate.epochs_left(job, tmp_path / "done") == 0
    assert estimate.epochs_left(job, tmp_path / "new") == job["trainer"]["epochs"]
    estimate.announce([(job, tmp_path / "done")], in_process=True)
    assert capsys.readouterr().out == ""


@pytest.mark.slow
def test_the_smoke_sweeps_estimate_is_within_a_factor_of_two_and_a_half(smoke_sweep):
    """The estimate printed before the shared smoke sweep against its jobs'
    measured wall time (each record's start to finish).

    The factor: the 2-core machines switch between a fast and a slow mode that
    differ by a factor of about 2 in wall time (docs/performance.md), and the
    probe and the jobs may fall in different modes; a smoke job's time is
    mostly tracing, which the probe measures once per kind of step and scales
    by the retraces it expects."""
    out = smoke_sweep.result.stdout
    size, shown = out.splitlines()[:2]
    records = [read_record(p) for p in find_records(smoke_sweep.root)]
    data = records[0]["data"]
    assert size == (f"sweep: 4 job(s) × 2 epochs × {data['train']:,} training images "
                    f"(+ {data['val']:,} evaluated per epoch)")
    estimated = seconds(re.match(r"estimate: (\S+) on this device \(cpu", shown).group(1))
    measured = sum((datetime.fromisoformat(r["finished_at"])
                    - datetime.fromisoformat(r["started_at"])).total_seconds() for r in records)
    assert measured / 2.5 <= estimated <= measured * 2.5, (estimated, measured, shown)
    assert "epoch 1/2" not in out  # trainer.verbose=0: no progress lines


def test_jobs_side_by_side_give_a_range_from_perfect_overlap_to_none():
    from ablation.sweep import estimate
    from ablation.sweep.speed import Speed

    jobs = [compose_config(["experiment=smoke"])] * 4
    speed = Speed(100.0, 1000.0, 10.0, "probe")
    one = estimate.report_lines(jobs, [(3, 1000, 100, 100)] * 4, 4, speed, "gpu, jax")
    four = estimate.report_lines(jobs, [(3, 1000, 100, 100)] * 4, 4, speed, "gpu, jax", 4)
    total = sum(speed.job_seconds(job, 3, 1000, 100, 100) for job in jobs)
    assert f"estimate: {estimate.format_duration(total)} on this device" in one[1]
    assert (f"estimate: {estimate.format_duration(total / 4)} to "
            f"{estimate.format_duration(total)} with 4 jobs at a time") in four[1]
