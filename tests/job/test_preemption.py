"""A job stopped by SIGTERM (a scheduler's preemption) or Ctrl-C: one line, an
``interrupted`` record, a W&B run finished as preempting, the conventional exit
status, and a rerun that resumes; the signal hand-over a launcher relies on."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ablation.runs.record import find_records, read_record
from ablation.runtime.signals import Interrupted, exit_code, interruptible
from tests.helpers.commands import cli_env, run_cli, smoke_overrides
from tests.helpers.paths import ROOT
from tests.helpers.stops import native_error
from tests.helpers.wandb_runs import wandb_inspect

ARGS = ["lsa=false", "spt=false", "wandb.mode=offline"]


def _stop_after_epoch(args, job, epoch, signum, times=1):
    """Start the command, send ``signum`` (``times`` times, as a user pressing
    Ctrl-C again) once ``job``'s checkpoint holds ``epoch``; its exit status,
    stdout and stderr."""
    proc = subprocess.Popen([sys.executable, "run_sweep.py", *args], cwd=ROOT, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            (state,) = job.parent.glob(job.name + "*/checkpoint/state.json")
            if json.loads(state.read_text())["epoch"] >= epoch:
                break
        except (OSError, ValueError):
            pass
        assert proc.poll() is None, "the job ended before it could be stopped"
        time.sleep(0.05)
    for n in range(times):
        time.sleep(0.3 * bool(n))
        proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


@pytest.mark.slow
def test_sigterm_and_ctrl_c_stop_with_one_line_and_the_rerun_resumes(tmp_path, wandb_cli):
    args = [*ARGS, *smoke_overrides(tmp_path, "trainer.epochs=8")]
    job = tmp_path / "smoke" / "vit-s0"  # the folder's suffix is found once it exists
    code, out, err = _stop_after_epoch(args, job, 1, signal.SIGTERM)
    (job,) = (tmp_path / "smoke").glob("vit-s0*")
    state = job / "checkpoint" / "state.json"
    assert code == 128 + signal.SIGTERM
    lines = [line for line in err.splitlines() if not line.startswith("wandb:")]
    assert len(lines) == 1 and "Traceback" not in err + out, err[-3000:]
    assert lines[0].startswith("vit-s0: interrupted by SIGTERM after epoch ")
    record = read_record(job / "run.json")
    assert record["status"] == "interrupted" and record["epochs_completed"] >= 1
    stopped_at = json.loads(state.read_text())["epoch"]
    assert record["error"].endswith(f"resume from epoch {stopped_at}")
    assert lines[0] == f"vit-s0: {record['error']}"
    assert "Traceback" in (job / "run_sweep.log").read_text()  # kept, in the job's log
    (run_dir,) = job.glob("wandb/offline-run-*")
    seen = wandb_inspect(wandb_cli, run_dir)
    assert seen["exit_code"] == 143
    stream = subprocess.run([wandb_cli, "leet", "inspect", str(run_dir), "--json"],
                            capture_output=True, text=True, check=True).stdout
    assert any(json.loads(x).get("type") == "preempting" for x in stream.splitlines() if x)

    code, out, err = _stop_after_epoch(args, job, stopped_at + 1, signal.SIGINT, times=2)
    assert code == 128 + signal.SIGINT
    lines = [line for line in err.splitlines()
             if not line.startswith("wandb:") and "received again while stopping" not in line]
    assert len(lines) == 1 and "Traceback" not in err + out, err[-3000:]
    assert lines[0].startswith("vit-s0: interrupted by Ctrl-C after epoch ")
    second = read_record(job / "run.json")
    assert second["status"] == "interrupted" and second["resumed_from_epochs"] == [stopped_at]

    done = run_cli(*args)  # the same command again
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = [read_record(p) for p in find_records(tmp_path)]
    assert record["status"] == "completed" and record["epochs_completed"] == 8
    assert len(record["resumed_from_epochs"]) == 2 and record["resumed_from_epochs"][0] == stopped_at
    assert [row["epoch"] for row in record["history"]] == list(range(1, 9))


def test_preemption_signal_raises_after_the_launchers_own_handler():
    """submitit requeues the Slurm job in its SIGUSR2 handler and then exits: the
    job must still see the stop as an interruption, so its record is written."""
    calls = []

    def launcher_handler(signum, frame):
        calls.append(signum)
        raise SystemExit(-1)

    previous = signal.signal(signal.SIGUSR2, launcher_handler)
    try:
        with pytest.raises(Interrupted) as stop, interruptible():
            os.kill(os.getpid(), signal.SIGUSR2)
            time.sleep(1)  # the handler runs at the next bytecode
        assert calls == [signal.SIGUSR2]
        assert exit_code(stop.value) == 128 + signal.SIGUSR2
        assert signal.getsignal(signal.SIGUSR2) is launcher_handler  # put back
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_only_the_first_sigterm_raises():
    with pytest.raises(Interrupted), interruptible():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        except Interrupted:
            os.kill(os.getpid(), signal.SIGTERM)  # during the clean-up: ignored
            time.sleep(0.2)
            raise
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


@pytest.mark.parametrize("later", [signal.SIGINT, signal.SIGTERM])
def test_after_ctrl_c_any_later_stop_is_ignored_during_the_clean_up(later):
    """Ctrl-C pressed twice (or a SIGTERM after it) must not break the clean-up
    that writes the ``interrupted`` record: the first stop is the one raised."""
    cleaned = False
    with pytest.raises(KeyboardInterrupt) as stop, interruptible():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            os.kill(os.getpid(), later)  # during the clean-up: ignored
            time.sleep(0.2)
            cleaned = True
            raise
    assert cleaned and not isinstance(stop.value, Interrupted)
    assert exit_code(stop.value) == 130


def test_slurm_preset_requeues_timed_out_jobs():
    """The preset's job is requeued on a time limit (submitit's SIGUSR2), so the
    rerun resumes it; without max_num_timeout submitit would give up at once."""
    shown = run_cli("hydra/launcher=slurm", "--cfg", "hydra", "--package", "hydra.launcher")
    assert shown.returncode == 0, shown.stderr[-2000:]
    launcher = __import__("yaml").safe_load(shown.stdout)
    launcher = launcher.get("hydra", launcher).get("launcher", launcher)
    assert launcher["max_num_timeout"] >= 1 and launcher["signal_delay_s"] > 0
    # Hydra's submitit launcher, with a wait that ends (tests/launchers/test_slurm.py)
    assert launcher["_target_"] == "hydra_plugins.vit_ablation.slurm.SlurmLauncher"
    from hydra_plugins.vit_ablation.slurm import SlurmLauncher

    assert "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher" in [
        f"{c.__module__}.{c.__qualname__}" for c in SlurmLauncher.__mro__]
    assert launcher["gpus_per_node"] == 1  # one GPU per job
    assert launcher["result_grace_s"] > 0  # a shared file system may show a result late
    with pytest.raises(ValueError, match="result_grace_s=-1"):
        SlurmLauncher(result_grace_s=-1)


def test_a_stop_swallowed_during_training_is_raised_again_at_the_next_batch():
    """A stop raised where something swallows it (a finalizer, a library's
    ``except BaseException``) must not let training run to its end."""
    from ablation.train.fit import StopWhenAsked

    check = StopWhenAsked()
    for signum, expected in ((signal.SIGTERM, Interrupted), (signal.SIGINT, KeyboardInterrupt)):
        with pytest.raises(expected) as stop, interruptible():
            check.on_train_batch_end(0)  # nothing pending: training goes on
            try:
                os.kill(os.getpid(), signum)
                time.sleep(1)  # the handler runs at the next bytecode
            except KeyboardInterrupt:
                pass  # swallowed
            check.on_train_batch_end(1)
        assert exit_code(stop.value) == 128 + signum
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    check.on_epoch_end(0)  # outside the block nothing is pending


def test_a_stop_while_the_data_loads_leaves_an_interrupted_record(tmp_path, monkeypatch):
    """Between the folder's lock and training (the data loading) a stop still
    leaves a record saying so; a second such stop leaves the first record as it
    was (an earlier attempt's record says where a rerun resumes from)."""
    from ablation.job import run_job
    from tests.helpers.config import compose

    def stopped(*args, **kwargs):
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr("ablation.job.lifecycle.load_dataset_cached", stopped)
    job = tmp_path / "job"
    with pytest.raises(Interrupted):
        run_job(compose("experiment=smoke", "wandb.mode=disabled", "trainer.verbose=0"), job)
    record = read_record(job / "run.json")
    assert record["status"] == "interrupted" and record["epochs_completed"] == 0
    assert record["error"] == ("interrupted by SIGTERM before its first epoch ended; rerun the "
                               "same command to start it")
    assert "data" not in record["timings"] and record["data"]  # which data it was to read
    written = (job / "run.json").read_bytes()
    with pytest.raises(Interrupted):
        run_job(compose("experiment=smoke", "wandb.mode=disabled", "trainer.verbose=0"), job)
    assert (job / "run.json").read_bytes() == written


@pytest.mark.parametrize("stop, name", [(Interrupted(signal.SIGTERM), "SIGTERM"),
                                        (KeyboardInterrupt(), "Ctrl-C")])
def test_a_stop_inside_native_code_is_still_a_stop(tmp_path, monkeypatch, stop, name):
    """A Ctrl-C or SIGTERM that TensorFlow's native code turned into a
    SystemError leaves an interrupted record and ends the job as that stop,
    not as a failure with a traceback; other errors stay what they are."""
    from ablation.job import run_job
    from ablation.runtime.signals import stop_behind
    from tests.helpers.config import compose

    def stopped(*args, **kwargs):
        raise native_error(stop)

    monkeypatch.setattr("ablation.job.lifecycle.train", stopped)
    job = tmp_path / "job"
    with pytest.raises(KeyboardInterrupt) as raised:
        run_job(compose("experiment=smoke", "wandb.mode=disabled", "trainer.verbose=0"), job)
    assert type(raised.value) is type(stop) and isinstance(raised.value.__cause__, SystemError)
    record = read_record(job / "run.json")
    assert record["status"] == "interrupted"
    assert record["error"].startswith(f"interrupted by {name} before its first epoch ended")
    assert "SystemError" in record["traceback"]  # what happened, kept
    error = native_error(ValueError("not a stop"))
    assert stop_behind(error) is error
    try:  # an error of its own while a stop was handled stays that error
        try:
            raise stop
        except KeyboardInterrupt:
            raise OSError("disk full")
    except OSError as e:
        assert stop_behind(e) is e


def test_a_stop_that_native_code_replaced_by_an_error_of_its_own_is_still_a_stop(
        tmp_path, monkeypatch):
    """SIGTERM inside a native call can come back as the binding's own error, the
    stop named only in its text (pybind11's ``REPLACED BY Interrupted: SIGTERM``), no
    cause linked: the job is still ``interrupted`` and ends as SIGTERM (143)."""
    from ablation.job import run_job
    from tests.helpers.config import compose

    def stopped(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except Interrupted:
            pass  # what the native call did with it
        raise RuntimeError("pybind11::error_already_set: REPLACED BY Interrupted: SIGTERM")

    monkeypatch.setattr("ablation.job.lifecycle.train", stopped)
    job = tmp_path / "job"
    with interruptible(), pytest.raises(Interrupted) as raised:
        run_job(compose("experiment=smoke", "wandb.mode=disabled", "trainer.verbose=0"), job)
    assert exit_code(raised.value) == 143
    record = read_record(job / "run.json")
    assert record["status"] == "interrupted", record["error"]
    assert record["error"].startswith("interrupted by SIGTERM")
    assert "REPLACED BY" in record["traceback"]  # what happened, kept


def test_a_stopped_record_says_where_the_rerun_resumes_before_its_history_is_back():
    """Stopped after a checkpoint but before training restored its history: the
    record names the checkpoint's epoch, not "its first epoch"."""
    from ablation.job.records import failed

    record = failed({"status": "running"}, Interrupted(signal.SIGTERM), resume_epoch=3)
    assert record["error"] == ("interrupted by SIGTERM after epoch 3; rerun the same command "
                               "to resume from epoch 3")
    fresh = failed({"status": "running"}, Interrupted(signal.SIGTERM))
    assert fresh["error"].endswith("before its first epoch ended; rerun the same command to "
                                   "start it")
    # an epoch done, stopped before its checkpoint was written: the rerun starts over
    from types import SimpleNamespace
    one_epoch = SimpleNamespace(history=[{"epoch": 1, "train/loss": 0.5}], resumed_from_epochs=[])
    unsaved = failed({"status": "running"}, KeyboardInterrupt(), one_epoch)
    assert unsaved["error"] == ("interrupted by Ctrl-C after epoch 1, before its first "
                                "checkpoint; rerun the same command to start it again")
