"""The benchmarks' plumbing (their figures are printed, never asserted)."""
import json

import pytest

from ablation.bench.__main__ import main as bench_main
from ablation.bench.sweep import bench_sweep


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
    monkeypatch.setattr("sys.argv", ["bench", "train", "experiment=smoke", "--steps", "2",
                                     "--warmup", "1", "--rounds", "1", "--concurrent", "2"])
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
