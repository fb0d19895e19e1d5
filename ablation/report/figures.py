"""What every report figure shares: matplotlib without a display, a grid of
panels, a block's completed runs, each run's variant label, seed lists."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ablation.config import SWITCHES
from ablation.report.tables import BLOCK, VARIANTS

TEMPERATURE_KEY = re.compile(r"^temperature/block_(\d+)(?:/head_\d+)?$")


def pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    return plt


def grid(plt, count: int, width: float = 6.5, height: float = 3.6, cols: int = 1):
    rows = -(-count // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    return fig, axes.ravel()


def seeds_text(seeds) -> str:
    """``seed 0`` / ``seeds 0, 1, 2``."""
    seeds = sorted({int(s) for s in seeds})
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def completed_runs(runs: pd.DataFrame, key) -> pd.DataFrame:
    """The completed runs of the block ``key``."""
    mask = np.logical_and.reduce([runs[c] == v for c, v in zip(BLOCK, key)])
    return runs[mask & (runs["status"] == "completed")]


def variant_label(row) -> str:
    """The paper's name of a run's variant (``SL-ViT``)."""
    return VARIANTS[tuple(bool(row[k]) for k in SWITCHES)]


def save_figure(fig, path: Path, dpi: int) -> Path:
    """Write ``fig`` as a PNG at ``path`` through the file door, atomically."""
    import io

    from ablation.files import atomic_write

    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=dpi, format="png")
    return atomic_write(path, buffer.getvalue(), fsync=False)
