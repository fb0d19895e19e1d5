"""The benchmarks' plumbing (their figures are printed, never asserted)."""
import json

import pytest

from benchmarks.__main__ import main as bench_main
from benchmarks.sweep import bench_sweep
from ablation.runs.record import find_records, read_record


@pytest.mark.slow
def test_bench_sweep_times_a_real_multirun(capsys):
    bench_sweep(["spt=true", "experiment=smoke", "trainer.epochs=1", "wandb.mode=disabled",
                 "report.after_sweep=false", "diagnostics.enabled=false"], rounds=1, against=None)
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["jobs"] == 1  # read back from the job's run.json
    assert 0 < out["train_s"] < out["wall_s"]
    assert out["overhead_s"] == pytest.approx(out["wall_s"] - out["train_s"])
    # fit timed from outside: all of the record's training seconds, and its own set-up
    assert out["train_s"] <= out["fit_s"] < out["wall_s"]
    assert out["overhead_fit_s"] == pytest.approx(out["wall_s"] - out["fit_s"])
    assert "overhead_ratio" not in out  # no --against, no ratio


def test_bench_sweep_refuses_a_checkout_without_run_sweep(tmp_path):
    with pytest.raises(SystemExit, match="no run_sweep.py there"):
        bench_sweep(["spt=true"], rounds=1, against=str(tmp_path))


@pytest.mark.slow
def test_bench_train_concurrent_adds_up_processes_training_at_once(capsys, monkeypatch):
    # one block: each of the three processes traces a smaller model (the plumbing is
    # the same)
    monkeypatch.setattr("sys.argv", ["bench", "train", "experiment=smoke", "model.depth=1",
                                     "--steps", "2", "--warmup", "1", "--rounds", "1",
                                     "--concurrent", "2"])
    bench_main()
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["concurrent"] == 2 and out["params"] > 0
    assert out["sharing_ratio"] == pytest.approx(out["train_images_per_s"]
                                                 / out["alone_train_images_per_s"])
    # first start to last end bounds the sum of the processes' own rates from below
    assert 0 < out["union_images_per_s"] <= out["train_images_per_s"]
    assert 0 <= out["overlap_s"] <= out["window_s"]


def test_bench_train_concurrent_refuses_a_baseline(monkeypatch):
    monkeypatch.setattr("sys.argv", ["bench", "train", "--concurrent", "2",
                                     "--baseline", "x.py"])
    with pytest.raises(SystemExit, match="drop --baseline"):
        bench_main()


@pytest.mark.slow
def test_bench_phases_splits_a_sweep_into_parts_that_add_up(smoke_sweep):
    from benchmarks.phases import JOB_PHASES, job_phases, split

    records = [read_record(p) for p in find_records(smoke_sweep.root)]
    starts = [r["timings"]["job_started_unix"] for r in records]
    ends = [r["timings"]["job_ended_unix"] for r in records]
    result = split(min(starts) - 5.0, max(ends) + 2.0, records)
    assert result["jobs"] == 4
    assert result["start_up_s"] == pytest.approx(5.0) and result["end_s"] == pytest.approx(2.0)
    assert result["wall_s"] == pytest.approx(7.0 + result["jobs_span_s"])
    for record in records:  # each job's parts add up to the job
        parts = job_phases(record["timings"])
        assert set(parts) == set(JOB_PHASES) and min(parts.values()) >= 0
        assert sum(parts.values()) == pytest.approx(record["timings"]["job"], abs=1e-6)
    # one job at a time: the jobs' summed time fits in their span
    assert result["job_sum_s"] <= result["jobs_span_s"] + 0.01 and result["overlap"] <= 1.01


def test_bench_phases_refuses_bad_jobs_at_once():
    with pytest.raises(SystemExit, match="--jobs-at-once must be positive integers"):
        bench_main(["phases", "--jobs-at-once", "0,x"])
