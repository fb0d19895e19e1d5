"""What a job does around its training (ablation/job/lifecycle.py): an unreadable record
is set aside with a line saying why, and the lock holder puts back the Hydra files a
second launch of the same job overwrote before it found the lock taken."""
import logging

from ablation.runs.record import RECORD_FILENAME


def test_an_unreadable_record_is_set_aside_and_the_line_says_why(tmp_path, caplog):
    from ablation.job.lifecycle import set_aside_unreadable_record

    job = tmp_path / "vit-s0"
    job.mkdir()
    (job / RECORD_FILENAME).write_text('{"schema": 1, "status": "completed"')
    with caplog.at_level(logging.WARNING):
        set_aside_unreadable_record(job)
    assert not (job / RECORD_FILENAME).exists()
    (kept,) = job.glob(".replaced/*/run.json")
    assert kept.read_text() == '{"schema": 1, "status": "completed"'
    assert "the record is unreadable" in caplog.text and "the job runs again" in caplog.text


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
