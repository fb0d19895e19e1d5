"""What every report figure shares: matplotlib without a display, a grid of panels,
one colour and marker per variant, side-by-side offsets, a block's completed runs,
and the door every figure is saved through (its text fitted first)."""
from __future__ import annotations

import io
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from ablation.config import SWITCHES
from ablation.files import atomic_write
from ablation.report.tables import BLOCK, VARIANTS

# One fixed colour and marker per variant, in VARIANTS order, the same in every
# figure (the paper's four stand apart).
VARIANT_COLORS = dict(zip(VARIANTS.values(), ["#555555", "#1f77b4", "#ff7f0e", "#2ca02c",
                                               "#e377c2", "#8c564b", "#d62728", "#9467bd"]))
MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*"]
EM_PER_CHARACTER = 0.6  # a character's width in the font's size, on average (an estimate)


def pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    return plt


def grid(count: int, width: float = 6.5, height: float = 3.6, cols: int = 1):
    """A figure of ``count`` panels, ``cols`` to a row, laid out around its text."""
    rows = -(-count // cols)
    fig, axes = pyplot().subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False,
                             layout="constrained")
    return fig, axes.ravel()


def dodge(index: int, count: int, step: float) -> float:
    """The sideways offset of series ``index`` of ``count`` drawn at the same
    positions, ``step`` apart and centred, so equal points sit side by side."""
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


def by_variant(runs: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(variant label, its runs), in the paper's order."""
    order = list(VARIANTS.values())
    return sorted(runs.groupby(runs.apply(variant_label, axis=1)),
                  key=lambda item: order.index(item[0]))


def _wrap(words: str, inches: float, size: float) -> str:
    """``words`` broken at spaces (a word too long alone, inside it) into lines of
    about the characters ``inches`` holds at font ``size``."""
    width = max(int(inches * 72 / (EM_PER_CHARACTER * size)), 6)
    return "\n".join(textwrap.fill(line, width) for line in words.split("\n"))


def fit(fig) -> None:
    """Wrap every title, axis label, legend entry and category label of ``fig`` to
    the width it is shown over, estimated from its panel's size (before layout), and
    set it literally (a ``$`` is not mathematics); constrained layout then makes room."""
    from matplotlib.ticker import FixedLocator

    inches = fig.get_figwidth(), fig.get_figheight()
    rooms = [(text, 0.95 * inches[0]) for text in fig.texts]
    for ax in (ax for ax in fig.axes if ax.get_visible()):
        box = ax.get_position(original=True)
        wide, high = box.width * inches[0], box.height * inches[1]
        legend = ax.get_legend().get_texts() if ax.get_legend() else []
        rooms += [(ax.title, wide), (ax.xaxis.label, wide), (ax.yaxis.label, high),
                  *[(text, wide / 2) for text in legend], *[(text, wide) for text in ax.texts]]
        for axis, length in ((ax.xaxis, wide), (ax.yaxis, high)):
            labels = [label.get_text() for label in axis.get_majorticklabels()]
            if isinstance(axis.get_major_locator(), FixedLocator) and any(labels):
                size = axis.get_majorticklabels()[0].get_fontsize()
                axis.set_ticks(axis.get_majorticklocs(),
                               [_wrap(label, length / len(labels), size) for label in labels])
                rooms += [(label, None) for label in axis.get_majorticklabels()]
    for text, room in rooms:
        text.set_parse_math(False)
        if room is not None:
            text.set_text(_wrap(text.get_text(), room, text.get_fontsize()))


def save_figure(fig, path: Path, dpi: int) -> Path:
    """Fit ``fig``'s text to its room (:func:`fit`), write it as a PNG at ``path``
    atomically, and close it."""
    try:
        fit(fig)
        buffer = io.BytesIO()
        fig.savefig(buffer, dpi=dpi, format="png")
    finally:
        pyplot().close(fig)
    return atomic_write(path, buffer.getvalue(), fsync=False)
