"""The record's ``timings``: where a job's seconds went, consistent with its clocks."""
from __future__ import annotations

import pytest

from ablation.runs.record import find_records, read_record

PHASES = ("data", "build", "train", "validation", "epoch_diagnostics", "test", "diagnostics",
          "save_model")


@pytest.mark.slow
def test_every_phase_is_timed_and_the_phases_fit_inside_the_job(smoke_sweep):
    for path in find_records(smoke_sweep.root):
        record = read_record(path)
        timings = record["timings"]
        assert all(timings[name] >= 0 for name in PHASES), timings
        assert timings["train"] > 0 and timings["test"] > 0 and timings["diagnostics"] > 0
        wall = timings["job_ended_unix"] - timings["job_started_unix"]
        assert timings["job"] == pytest.approx(wall, abs=0.5)
        assert sum(timings[name] for name in PHASES) <= timings["job"]
        # fit's wall time holds the epochs' training, evaluation and diagnostics
        assert (timings["train"] + timings["validation"] + timings["epoch_diagnostics"]
                <= record["train_seconds"] + 0.01)
        # two epochs: the first one's excess is its tracing and compiling
        assert 0 <= timings["first_epoch_excess"] <= timings["first_epoch_train"]


def test_phases_sum_repeated_phases(monkeypatch):
    import itertools
    from types import SimpleNamespace

    from ablation.train import timings
    from ablation.train.epoch_metrics import EpochMetrics
    from ablation.train.timings import Phases

    # a clock that reads 0.25 s later at every reading: each phase lasts 0.25 s
    clock = itertools.count(0.0, 0.25)
    monkeypatch.setattr(timings, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    phases, epochs = Phases(), EpochMetrics()
    for _ in range(2):
        with phases("test"):
            pass
    epochs.attempt_starts = [0]
    epochs.train_phase_seconds = [3.0, 1.0, 1.2, 0.8]
    epochs.history = [{"epoch": i + 1, "epoch_seconds": s + 0.5}
                      for i, s in enumerate(epochs.train_phase_seconds)]
    summary = phases.summary(epochs)
    assert summary["test"] == pytest.approx(0.5)   # both phases, and only them
    assert summary["first_epoch_excess"] == pytest.approx(2.0)   # 3.0 - median(1.0, 1.2, 0.8)
    assert summary["train"] == pytest.approx(6.0) and summary["validation"] == pytest.approx(2.0)


def test_one_start_up_rule_for_every_reader_of_epoch_times():
    from ablation.runs.epochs import start_up_seconds, steady_epochs, steady_seconds
    from ablation.train.progress import eta_seconds

    seconds = [3.0, 1.0, 1.2, 0.8, 5.0]                 # a stall in the last epoch
    assert steady_seconds(seconds) == pytest.approx(1.1)   # the median, not the mean 2.0
    assert start_up_seconds(seconds) == pytest.approx(1.9)
    assert steady_seconds([4.0]) is None and start_up_seconds([4.0]) is None
    assert start_up_seconds([1.0, 2.0, 2.0]) == 0.0
    assert steady_epochs(6, [0, 3]) == [1, 2, 4, 5]     # a resumed run starts up again
    assert steady_epochs(1) == [] and steady_epochs(3, []) == [1, 2]
    # the ETA reads the same rule: 2 epochs left at the median, one later start-up
    assert eta_seconds(seconds, 2, later_jobs=1) == pytest.approx(2 * 1.1 + 1.9)
