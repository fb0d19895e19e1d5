"""What every report figure shares: matplotlib without a display, a grid of
panels, one colour and marker per variant, side-by-side offsets for points
that would coincide, a block's completed runs, each run's variant label, seed
lists, and the door every figure is saved through (its text fitted first)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ablation.config import SWITCHES
from ablation.report.tables import BLOCK, VARIANTS

TEMPERATURE_KEY = re.compile(r"^temperature/block_(\d+)(?:/head_\d+)?$")

# One fixed colour and marker per variant, in VARIANTS order, the same in every
# figure (the paper's four stand apart).
VARIANT_COLORS = dict(zip(VARIANTS.values(), [
    "#555555",   # ViT
    "#1f77b4",   # SPT
    "#ff7f0e",   # LSA mask
    "#2ca02c",   # learnable temperature
    "#e377c2",   # SPT + LSA mask
    "#8c564b",   # SPT + temp.
    "#d62728",   # LSA (mask + temp.)
    "#9467bd",   # SL-ViT
]))
MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*"]


def pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    return plt


def grid(plt, count: int, width: float = 6.5, height: float = 3.6, cols: int = 1):
    """A figure of ``count`` panels, ``cols`` to a row, laid out around its text."""
    rows = -(-count // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False,
                             layout="constrained")
    return fig, axes.ravel()


def variant_marker(label: str) -> str:
    """The marker of the variant named ``label``."""
    return MARKERS[list(VARIANTS.values()).index(label) % len(MARKERS)]


def dodge(index: int, count: int, step: float) -> float:
    """The sideways offset of series ``index`` of ``count`` drawn at the same
    positions: ``step`` apart, centred on the true position, so that points of
    different series with the same value sit side by side, not on top."""
    return (index - (count - 1) / 2) * step


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
    """Fit ``fig``'s text to its room (:mod:`figure_text`), write it as a PNG at
    ``path`` through the file door, atomically, and close it."""
    import io

    from ablation.files import atomic_write
    from ablation.report.figure_text import fit

    try:
        fit(fig)
        buffer = io.BytesIO()
        fig.savefig(buffer, dpi=dpi, format="png")
    finally:
        pyplot().close(fig)
    return atomic_write(path, buffer.getvalue(), fsync=False)
