"""Where a job's seconds went: the record's ``timings`` (building, the first epoch's
excess, training, evaluation, diagnostics, test, saving; the job adds its own)."""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from ablation.runs.epochs import start_up_seconds
from ablation.train.epoch_metrics import EpochMetrics


class Phases:
    """Seconds per named phase, summed over every ``with phases("name"):``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def summary(self, epochs: EpochMetrics) -> dict[str, float | None]:
        """The timed phases plus what this attempt's epochs' clocks say;
        ``first_epoch_excess``: the first training phase minus the others' median
        (tracing and compiling; None with a single epoch)."""
        start = epochs.attempt_starts[-1] if epochs.attempt_starts else 0
        phases = [s for s in epochs.train_phase_seconds[start:] if s is not None]
        rows = epochs.history[start:]
        excess = start_up_seconds(phases)
        validation = sum(max(row.get("epoch_seconds", 0.0) - s, 0.0)
                         for row, s in zip(rows, phases))
        return {**{k: round(v, 3) for k, v in self.seconds.items()},
                "first_epoch_train": round(phases[0], 3) if phases else None,
                "first_epoch_excess": round(excess, 3) if excess is not None else None,
                "train": round(sum(phases), 3), "validation": round(validation, 3),
                "epoch_diagnostics": round(epochs.extras_seconds, 3)}
