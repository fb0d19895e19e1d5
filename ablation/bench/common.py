"""What every benchmark shares: composing the run config as the sweep command
does, and alternating two sides so machine drift hits both alike."""
from __future__ import annotations

import statistics

from ablation.config.compose import compose_config

__all__ = ["alternate", "compose_config"]


def alternate(sides: list[str], rounds: int, run, line):
    """Run each side once per round, A B A B..., so machine drift hits both
    alike; prints ``line(result)`` per run. Returns the runs by side and a
    ``median(side, key)`` of them."""
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in sides:
            result = run(side)
            runs[side].append(result)
            print(f"round {r + 1} {side:>8}: {line(result)}", flush=True)

    def median(side: str, key: str) -> float:
        return statistics.median(result[key] for result in runs[side])
    return runs, median
