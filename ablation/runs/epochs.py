"""How a run's epoch times are read: the first epoch of each attempt is start-up.

The first epoch a process trains includes tracing and compiling the step, which
says nothing about the model's speed: a run's steady epoch is the median of its
other epochs, its start-up the first epoch's excess over that. Every reader of
epoch times uses these.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence


def steady_seconds(seconds: Sequence[float]) -> float | None:
    """The median of the epochs after the first; None with fewer than two."""
    return statistics.median(seconds[1:]) if len(seconds) > 1 else None


def start_up_seconds(seconds: Sequence[float]) -> float | None:
    """The first epoch's excess over a steady epoch (at least 0); None with fewer than two."""
    steady = steady_seconds(seconds)
    return None if steady is None else max(seconds[0] - steady, 0.0)


def steady_epochs(epochs: int, attempt_starts: Iterable[int] = (0,)) -> list[int]:
    """The epochs (0-based) that are not the first of an attempt (``attempt_starts``:
    the first epoch of each; epoch 0 always is one)."""
    firsts = {0, *attempt_starts}
    return [i for i in range(epochs) if i not in firsts]
