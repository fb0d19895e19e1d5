"""What a sweep will cost, printed before its first job trains.

The speed comes from earlier completed runs of the same model and input on this
host and backend, or else from a probe of the first job's model
(:mod:`ablation.sweep.speed`). The probe runs only where the jobs run on this
machine (the basic launcher, whose imports, data and compiled programs then serve
the first job; or joblib): elsewhere only earlier runs give an estimate.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from ablation.sweep.speed import Speed, earlier_speed, probe, speed_key
from ablation.train.progress import format_duration

log = logging.getLogger(__name__)

LONG_ON_CPU_S = 2 * 3600  # above this on a CPU the estimate names the faster paths


def before_sweep(jobs: list[tuple[dict, Path]], launcher) -> None:
    """What ``SweepStart`` prints before the first job, as the ``launcher`` (Hydra's
    ``hydra.launcher`` config) will run the jobs. Data the first job cannot load is
    refused here; any other failure is one warning: the sweep does not depend on it."""
    from ablation.config.refusals import Refused
    from ablation.data import DataError

    if not jobs or not jobs[0][0]["estimate"]:
        return
    try:
        target = str(launcher.get("_target_", ""))
        local = target.endswith((".BasicLauncher", ".JoblibLauncher"))
        at_once = int(launcher.get("n_jobs", 1) or 1) if "Joblib" in target else 1
        if at_once < 1:  # joblib's -1: every core
            at_once = os.cpu_count() or 1
        announce(jobs, in_process=local, at_once=at_once)
    except DataError as e:  # the first job's data: it would be refused there
        raise Refused(e) from None
    except Exception as e:
        log.warning("no estimate: %s: %s", type(e).__name__, e)


def images(job: dict, counts: tuple[int, int, int]) -> tuple[int, int, int]:
    """(training images per epoch, images evaluated per epoch, test images) of a
    job whose dataset splits into ``counts`` (train, validation, test)."""
    from ablation.train.inputs import Feed

    feed, (train, val, test) = Feed.of(job), counts
    if job["trainer"]["protocol"] == "official":
        return feed.images_per_epoch(train + val), test, test
    return feed.images_per_epoch(train), val, test


def split_counts(data) -> tuple[int, int, int]:
    return len(data.x_train), len(data.x_val), len(data.x_test)


def epochs_left(job: dict, folder: Path) -> int:
    """The epochs ``job`` will train: none when completed in ``folder``, fewer
    when it resumes there."""
    from ablation.runs.record import earlier_run

    earlier = earlier_run(folder) or {}
    if earlier.get("status") == "completed":
        return 0
    done = earlier.get("epochs_completed") or earlier.get("epoch") or 0
    return max(int(job["trainer"]["epochs"]) - int(done), 0)


def announce(jobs: list[tuple[dict, Path]], in_process: bool, at_once: int = 1) -> None:
    """Print the sweep's size and, where a speed is known or can be probed, its
    estimated wall time. ``in_process``: the jobs run on this machine, so a probe
    here measures their device; ``at_once``: how many run side by side."""
    from ablation.data import load_dataset, load_dataset_cached

    todo = [(job, left) for job, folder in jobs if (left := epochs_left(job, folder))]
    if not todo:
        return  # every job completed here already: nothing will train
    first = todo[0][0]
    device = start_backend(first)
    counts: dict[str, tuple[int, int, int]] = {}
    data = load_dataset_cached(first["dataset"], int(first["seed"]))  # the first job's, reused
    counts[repr(sorted(first["dataset"].items()))] = split_counts(data)
    sizes = []
    for job, left in todo:
        key = repr(sorted(job["dataset"].items()))
        if key not in counts:
            counts[key] = split_counts(load_dataset(job["dataset"], int(job["seed"])))
        sizes.append((left, *images(job, counts[key])))
    results_dir = Path(str(first["results_dir"]))
    speed = earlier_speed(first, results_dir) or (probe(first, data) if in_process else None)
    print("\n".join(report_lines([job for job, _ in todo], sizes, len(jobs), speed, device,
                                 min(at_once, len(todo)))), flush=True)


def report_lines(jobs: list[dict], sizes: list[tuple[int, int, int, int]], total_jobs: int,
                 speed: Speed | None, device: str, at_once: int = 1) -> list[str]:
    """The printed lines for the ``jobs`` that will train, each of ``sizes``
    (epochs, training images per epoch, evaluated per epoch, test images). With
    ``at_once`` jobs side by side the wall time lies between the sum divided by
    ``at_once`` and the sum: both are printed. A tuned sweep's trials are counted apart."""
    from ablation.config.tuning import role

    trials = (sum(role(job) == "trial" for job in jobs)
              if any(job["tune"] is not None for job in jobs) else None)
    lines = [size_line(sizes, total_jobs, trials)]
    if speed is None:
        return [*lines, "estimate: none (no earlier run of this model here, and the probe runs "
                        "only where the jobs run on this machine: the basic and joblib launchers)"]
    total = sum(speed.job_seconds(job, *size) for job, size in zip(jobs, sizes))
    mixed = len({speed_key(job, backend="-") for job in jobs}) > 1
    when = (f"{format_duration(total / at_once)} to {format_duration(total)} with {at_once} "
            f"jobs at a time" if at_once > 1 else format_duration(total))
    lines.append(
        f"estimate: {when} on this device ({device}; {speed.source}: "
        f"{speed.train_images_per_s:,.1f} training images/s, "
        f"{speed.eval_images_per_s:,.0f} evaluated/s, {speed.start_up_s:.0f}s per job to "
        f"build and compile" + (f"; {speed.peak_memory}" if speed.peak_memory else "") + ")"
        + (" for the first job's model and batch; the others are taken to train as fast"
           if mixed else "") + "; estimate=false skips this")
    if device.startswith("cpu") and total > LONG_ON_CPU_S:
        lines.append(
            "that is long for a CPU: a GPU trains this in a small fraction of the time "
            "(docs/performance.md), or first try experiment=smoke or fewer epochs "
            "(trainer.epochs=...)")
    return lines


def size_line(sizes: list[tuple[int, int, int, int]], jobs: int,
              trials: int | None = None) -> str:
    """``sweep: 4 job(s) × 50 epochs × 45,000 training images (+ 5,000 evaluated per
    epoch)`` for the ``sizes`` of the jobs that will train, of ``jobs`` in all;
    ``trials``: how many of those are a tuned sweep's trials."""
    done = jobs - len(sizes)
    count = f"{len(sizes)} job(s)"
    if trials is not None:
        count += f" ({len(sizes) - trials} final run(s), {trials} tuning trial(s))"
    skipped = (f" ({done} {'final run(s)' if trials is not None else 'more'} already "
               f"completed here)" if done else "")
    if len({size[:3] for size in sizes}) == 1:
        left, train, evaluated, _ = sizes[0]
        return (f"sweep: {count} × {left} epochs × {train:,} training images "
                f"(+ {evaluated:,} evaluated per epoch){skipped}")
    epochs = sum(size[0] for size in sizes)
    trained = sum(left * train for left, train, _, _ in sizes)
    evaluated = sum(left * ev for left, _, ev, _ in sizes)
    return (f"sweep: {count}, {epochs} epochs in all, {trained:,} training images "
            f"(+ {evaluated:,} evaluated){skipped}")


def start_backend(job: dict) -> str:
    """Load the backend as a job does (W&B first, the device configured, the
    native start-up lines kept quiet), and name the device: ``"<platform>, <backend>"``,
    e.g. ``"gpu, jax"``."""
    from ablation.runs.tracking import import_early
    from ablation.runtime.accelerator import configure, device_platform
    from ablation.runtime.native_log import quiet_native_stderr
    from ablation.runtime.process import freeze_imported_objects

    import_early(str(job["wandb"]["mode"]))
    with quiet_native_stderr():
        configure(job["gpu"])  # loads Keras, its settings made first
        import keras

        device = f"{device_platform()}, {keras.backend.backend()}"
    freeze_imported_objects()
    return device
