"""dataset=synthetic: CIFAR-100's shape and size for timing, and a report that says so."""
from __future__ import annotations

import numpy as np
import pytest

from ablation.data import DataError, load_dataset
from tests.helpers.config import compose


def _synthetic(*overrides):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(compose("dataset=synthetic_cifar100", *overrides),
                                  resolve=True)["dataset"]


def test_synthetic_cifar100_has_cifar100s_shape_and_size_and_is_the_same_every_time():
    from ablation.data.fingerprint import data_fingerprint

    cfg = _synthetic("dataset.train_size=500", "dataset.test_size=100")
    a, b = load_dataset(cfg, seed=0), load_dataset(cfg, seed=1)
    assert a.x_train.shape == (450, 32, 32, 3) and a.x_test.shape == (100, 32, 32, 3)
    assert a.num_classes == 100 and a.x_train.dtype == np.float32
    assert 0 <= a.x_train.min() and a.x_train.max() <= 255 and a.x_train.std() > 50
    np.testing.assert_array_equal(a.x_test, b.x_test)          # drawn from split_seed
    assert not np.array_equal(a.x_val, b.x_val)                # the split follows the run seed
    full = _synthetic()
    assert (full["train_size"], full["test_size"]) == (50000, 10000)
    assert data_fingerprint(cfg) != data_fingerprint({**cfg, "split_seed": 1})


def test_synthetic_without_its_sizes_is_one_line():
    from ablation.data import check_source

    with pytest.raises(DataError, match="dataset=synthetic needs dataset.train_size"):
        check_source({**_synthetic(), "train_size": None})


@pytest.mark.slow
def test_a_report_of_synthetic_runs_says_its_accuracies_mean_nothing(smoke_sweep, tmp_path):
    import json

    from ablation.report import write_report
    from ablation.runs.record import find_records

    # the shared sweep's records, as runs on synthetic data would say they were
    for path in find_records(smoke_sweep.root):
        record = json.loads(path.read_text())
        record["dataset"] = record["config"]["dataset"]["name"] = "synthetic"
        (tmp_path / "synthetic-tiny" / path.parent.name).mkdir(parents=True)
        (tmp_path / "synthetic-tiny" / path.parent.name / "run.json").write_text(
            json.dumps(record))
    report = write_report(tmp_path / "synthetic-tiny", make_plots=False,
                          wandb_settings={"mode": "disabled"})
    assert "SYNTHETIC DATA" in report.markdown and "means nothing" in report.markdown
    plain = write_report(smoke_sweep.root, out_dir=tmp_path / "plain", make_plots=False,
                         wandb_settings={"mode": "disabled"})
    assert "SYNTHETIC" not in plain.markdown
