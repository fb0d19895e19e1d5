"""``temperature.png``: how far each layer's learned temperature moved from its
start T0 = sqrt(key_dim), in percent, every panel on one shared axis of at least
±:data:`FLOOR_PCT` %, so a small drift looks as small as it is.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ablation.report.figures import (by_variant, completed_runs, grid, pyplot, save_figure,
                                     seeds_text)
from ablation.report.render import block_title
from ablation.report.tables import BLOCK

TEMPERATURE_KEY = re.compile(r"^temperature/block_(\d+)(?:/head_\d+)?$")
FLOOR_PCT = 5.0   # the axis spans at least ±5 % of the start value
MARGIN = 1.15     # room above the largest change


def _layers(history: list[dict]) -> pd.DataFrame | None:
    """Epochs x layers (heads averaged) of one run's temperatures, or None."""
    frame = pd.DataFrame(history).set_index("epoch") if history else pd.DataFrame()
    columns = [c for c in frame.columns if TEMPERATURE_KEY.match(c)]
    if not columns:
        return None
    return frame[columns].T.groupby(lambda c: int(TEMPERATURE_KEY.match(c).group(1))).mean().T


def changes(block_runs: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, list[int], bool]]:
    """Per variant: epochs (0 first) x layers of the mean % change from the start,
    the seeds averaged, and whether the start is T0 (else the first epoch's value)."""
    out = {}
    for label, group in by_variant(block_runs):
        frames, seeds, from_t0 = [], [], True
        for _, run in group.iterrows():
            layers = _layers(run["history"])
            if layers is None:
                continue
            start = run.get("temperature_start")
            if not (isinstance(start, float) and np.isfinite(start)):
                start, from_t0 = layers.iloc[0], False  # older records: from epoch 1
            change = 100 * (layers / start - 1)
            if from_t0:
                change.loc[0] = 0.0
            frames.append(change.sort_index())
            seeds.append(int(run["seed"]))
        if frames:
            out[label] = (pd.concat(frames).groupby(level=0).mean(), seeds, from_t0)
    return out


def limit(changes: list[pd.DataFrame]) -> float:
    """The shared ± limit of every panel's y axis, in percent."""
    largest = max((float(np.nanmax(np.abs(c.to_numpy()))) for c in changes), default=0.0)
    return max(FLOOR_PCT, MARGIN * largest)


def temperature_figure(table: pd.DataFrame, runs: pd.DataFrame, path: Path) -> Path | None:
    """Write ``path``, or return None when no run learned a temperature."""
    panels = []
    for key, _ in table.groupby(BLOCK, sort=False):
        block_runs = completed_runs(runs, key)
        starts = block_runs["temperature_start"].dropna()
        for label, found in changes(block_runs).items():
            panels.append((key, label, found + (starts.iloc[0] if len(starts) else None,)))
    if not panels:
        return None
    plt = pyplot()
    fig, axes = grid(len(panels), width=5, height=3.6, cols=min(len(panels), 2))
    bound = limit([found[0] for _, _, found in panels])
    for ax, (key, label, (change, seeds, from_t0, start)) in zip(axes, panels):
        colors = plt.cm.viridis(np.linspace(0, 0.9, change.shape[1]))
        for color, layer in zip(colors, change.columns):
            ax.plot(change.index, change[layer], color=color, label=f"block {layer}",
                    marker="o", markersize=3)
        reference = (f"start T0 = {start:.3g} (√key_dim)" if from_t0 and start
                     else "epoch 1's value")
        ax.axhline(0.0, color="black", linestyle="--", linewidth=1, label=reference)
        ax.set_ylim(-bound, bound)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("epoch")
        ax.set_ylabel("change from start (%)" if from_t0 else "change from epoch 1 (%)")
        # the variant first: it is what sets neighbouring panels apart
        ax.set_title(f"{label}, mean over {seeds_text(seeds)}\n{block_title(*key)}", fontsize=9)
        ax.legend(fontsize=6, ncol=2)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("Learned temperature per layer: change from its start value "
                 f"(shared axis, ±{bound:.3g} %)", fontsize=10)
    return save_figure(fig, path, dpi=120)
