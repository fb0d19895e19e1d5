"""How fast this device trains a job's model: measured by a short probe, or
read from an earlier run's record (:mod:`ablation.sweep.estimate` prints it)."""
from __future__ import annotations

import logging
import math
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from ablation.runs.epochs import start_up_seconds, steady_seconds

log = logging.getLogger(__name__)

PROBE_SECONDS = 1.0  # timed steps of each kind: at least this long (and 2 steps), at most 5


@dataclass
class Speed:
    """How fast this device trains one job's model, and where that came from."""
    train_images_per_s: float
    eval_images_per_s: float
    start_up_s: float  # a job's cost beyond its epochs: building, tracing, compiling
    source: str
    peak_memory: str | None = None
    train_trace_s: float = 0.0  # of start_up_s: tracing the training step once
    eval_trace_s: float = 0.0  # and the evaluation step
    pads: bool = False  # short batches padded (trainer.pad_batches): no trace for them

    def job_seconds(self, job: dict, epochs: int, train: int, evaluated: int, test: int
                    ) -> float:
        """One job's wall time: start-up, ``epochs`` epochs, the final test.

        A step is traced again for a batch of another size (an epoch's last,
        partial batch, unless short batches are padded; TensorFlow then relaxes
        the shape once), and the locality probe traces its own prediction step:
        each costs about one trace more.
        """
        batch = int(job["trainer"]["batch_size"])
        short = not self.pads
        again = (self.train_trace_s * (short and bool(train % batch))
                 + self.eval_trace_s * ((short and bool(evaluated % batch or test % batch))
                                        + bool(job["diagnostics"]["enabled"])))
        return (self.start_up_s + again + test / self.eval_images_per_s
                + epochs * (train / self.train_images_per_s + evaluated / self.eval_images_per_s))


def speed_key(job: dict, host: str | None = None, backend: str | None = None) -> tuple:
    """What a measured speed carries over between runs: the model, the data's
    name and size limits, the batch, the precision, the host and the backend."""
    trainer, data = job["trainer"], job["dataset"]
    return (repr(sorted(job["model"].items())), data["name"], data.get("image_size"),
            int(trainer["batch_size"]), str(trainer.get("precision", "float32")),
            host or platform.node(), backend or _backend())


def _backend() -> str:
    import keras

    return keras.backend.backend()


def earlier_speed(job: dict, results_dir: Path) -> Speed | None:
    """The speed of the newest completed run in ``results_dir`` with ``job``'s
    :func:`speed_key`, from its record's throughput and epoch times."""
    from ablation.runs.record import RecordError, find_records, read_record

    found = []
    for path in find_records(results_dir) if results_dir.is_dir() else []:
        try:
            record = read_record(path)
        except RecordError:
            continue
        env, config = record.get("environment") or {}, record.get("config") or {}
        epochs = [row.get("epoch_seconds") for row in record.get("history") or []]
        if (record.get("status") != "completed" or not record.get("train_images_per_s")
                or not all(epochs) or "trainer" not in config):
            continue
        try:
            same = speed_key(config, env.get("host"), env.get("backend")) == speed_key(job)
        except (KeyError, TypeError, ValueError):
            continue
        if same:
            found.append((record.get("finished_at") or "", record, epochs))
    if not found:
        return None
    _, record, epochs = max(found, key=lambda f: f[0])
    counts, trainer = record.get("data") or {}, record["config"]["trainer"]  # as speed_key read it
    train_rate = float(record["train_images_per_s"])
    train_images = int(counts.get("train", 0)) * int(trainer.get("passes_per_epoch", 1))
    steady = steady_seconds(epochs) or epochs[0]
    evaluated = int(counts.get("test" if trainer.get("protocol") == "official" else "val", 0))
    eval_s = max(steady - train_images / train_rate, 1e-3)
    return Speed(train_rate, evaluated / eval_s if evaluated else math.inf,
                 start_up_seconds(epochs) or 0.0, f"earlier run {record.get('run_name')} here")


def probe(job: dict, data) -> Speed:
    """``job``'s model as training builds and compiles it, trained on a few of
    its batches and evaluated on a few."""
    import keras

    from ablation.augment.normalization import normalization_statistics
    from ablation.train.compile import compiled_model, pad_batches, use_precision
    from ablation.train.inputs import evaluation_split

    trainer, batch = job["trainer"], int(job["trainer"]["batch_size"])
    started = time.perf_counter()
    use_precision(trainer)
    model = compiled_model(job, data, normalization_statistics(job, data.x_train))
    x, y = evaluation_split(job, data, False, data.x_train[:batch], data.y_train[:batch])
    built = time.perf_counter()
    model.train_on_batch(x, y)  # traced and compiled here
    train_trace = time.perf_counter() - built
    train_s = _timed(lambda: model.train_on_batch(x, y))
    t = time.perf_counter()
    model.test_on_batch(x, y)
    eval_trace = time.perf_counter() - t
    eval_s = _timed(lambda: model.test_on_batch(x, y))
    memory, pads = peak_memory(), pad_batches(trainer, model)
    keras.backend.clear_session(free_memory=True)
    return Speed(len(x) / train_s, len(x) / eval_s, built - started + train_trace + eval_trace,
                 "probe", memory, train_trace, eval_trace, pads)


def _timed(step) -> float:
    """Seconds per call of ``step`` after one untimed call: at least 2 calls and
    :data:`PROBE_SECONDS`, at most 5."""
    step()
    times = []
    while len(times) < 5 and (len(times) < 2 or sum(times) < PROBE_SECONDS):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def peak_memory() -> str | None:
    """The device's peak memory so far, where the backend says: a GPU's peak
    bytes (JAX, TensorFlow, PyTorch), else this process's peak resident set."""
    import keras

    backend, peak = keras.backend.backend(), None
    try:
        if backend == "jax":
            import jax

            device = jax.devices()[0]
            if device.platform != "cpu":
                peak = ("GPU", (device.memory_stats() or {}).get("peak_bytes_in_use"))
        elif backend == "tensorflow":
            import tensorflow as tf

            if tf.config.list_logical_devices("GPU"):
                peak = ("GPU", tf.config.experimental.get_memory_info("GPU:0")["peak"])
        elif backend == "torch":
            import torch

            if torch.cuda.is_available():
                peak = ("GPU", torch.cuda.max_memory_allocated())
    except Exception as e:  # a backend without the query: say nothing about the device
        log.debug("no device memory figure: %s", e)
        return None
    if peak is not None:
        return f"GPU peak {peak[1] / 2**30:.1f} GiB" if peak[1] else None
    import resource

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return f"peak resident memory {peak_kib / 2**20:.1f} GiB"
