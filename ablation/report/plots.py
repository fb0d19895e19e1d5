"""PNG figures: top-1 per variant and validation top-1 per epoch, each saying what
it shows (which statistic over which seeds, what the error bars are), and
:func:`html_figures`, every figure embedded in the HTML report with its caption.
"""
from __future__ import annotations

import base64
import html
from pathlib import Path

import numpy as np
import pandas as pd

from ablation.config.switches import BASELINE_LABEL
from ablation.files import read_bytes
from ablation.report.figures import (MARKERS, VARIANT_COLORS, by_variant, completed_runs, grid,
                                     save_figure, seeds_text)
from ablation.report.captions import block_architecture, own_name
from ablation.report.render import block_title
from ablation.report.tables import BLOCK, VARIANTS

# One (dash pattern, marker) per variant, all different, drawn in VARIANTS order with
# shrinking width, so an earlier line still shows around a later one on top of it.
DASHES = ["-", (0, (6, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2)), (0, (3, 1)),
          (0, (6, 2, 1, 2, 1, 2)), (0, (10, 3)), (0, (2, 3))]
LINE_STYLES = list(zip(DASHES, MARKERS))
WIDEST, NARROWEST = 3.2, 1.0   # line widths of the first and the last variant drawn
BIGGEST, SMALLEST = 9.0, 4.0   # marker sizes likewise
FIGURE_LIMIT = 64 << 20  # bytes of one plot embedded in the HTML report
CAPTIONS = {
    "top1": ("Test top-1 after the final epoch per variant: the point is the mean over the "
             "seeds, the error bar ±1 sample standard deviation across them (none with one "
             "seed); n under each label."),
    "tuning": ("Validation top-1 of every trial against the searched value, per variant "
               "(log scale); the filled marker is the variant's chosen value. Where "
               "variants tried the same value, their points are set slightly apart "
               "sideways (a few percent of the axis) so that none hides another."),
    "val_top1": ("Validation top-1 per epoch (test top-1 under the official protocol), one line "
                 "per variant, mean over the seeds named in the title."),
    "temperature": ("Learned softmax temperature per layer: change from its start value "
                    "T0 = sqrt(key_dim), in percent, mean over the seeds named in each panel; "
                    "every panel on the same axis, the dashed line is the start."),
    "locality_distance": "Mean attention distance per layer (dots: heads; line: their mean).",
    "locality_entropy": "Normalised attention entropy per layer (dots: heads; line: their mean).",
}


def n_text(block: pd.DataFrame) -> str:
    """``mean over 3 seeds`` (or ``n per point`` when the variants differ)."""
    ns = set(block.loc[block["status"] == "ok", "n"])
    if len(ns) == 1:
        (n,) = ns
        return f"mean over {n} seed{'s' if n != 1 else ''}"
    return "mean over n seeds (n per point)"


def top1_bars(table: pd.DataFrame, path: Path) -> Path:
    """Mean test top-1 per variant with standard-deviation error bars: points, not bars,
    whose length on the zoomed axis would exaggerate the differences."""
    groups = list(table.groupby(BLOCK, sort=False))
    fig, axes = grid(len(groups))
    for ax, (key, block) in zip(axes, groups):
        x = np.arange(len(block))
        means = block["top1_mean"].to_numpy(dtype=float)
        errs = block["top1_std"].fillna(0).to_numpy(dtype=float)
        base = np.nanmin(means) if np.isfinite(means).any() else 0.0
        for xi, (_, r) in zip(x, block.iterrows()):
            color = "#555555" if r["variant"] == BASELINE_LABEL else "#1f77b4"
            if np.isfinite(means[xi]):
                ax.errorbar(xi, means[xi], yerr=errs[xi], fmt="o", color=color, capsize=4)
            label = f"{r['top1_mean']:.2f}" if r["status"] == "ok" else r["status"]
            y = means[xi] + errs[xi] if np.isfinite(means[xi]) else base
            ax.annotate(f"{label}\nn={r['n']}", (xi, y), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 3), textcoords="offset points")
        ax.set_xlim(-0.6, len(block) - 0.4)
        # upright variant names: saving wraps a long one to the space between ticks
        architecture = block_architecture(block)
        ax.set_xticks(x, [own_name(v, architecture) for v in block["variant"]], fontsize=8)
        ok = block["top1_mean"].dropna()
        if len(ok):
            low = max(0.0, ok.min() - 3 * max(block["top1_std"].fillna(0).max(), 1.0))
            # room above the highest error bar for its two-line annotation
            ax.set_ylim(low, min(100.0, np.nanmax(means + errs) + 6))
        ax.set_ylabel("test top-1 (%), final epoch")
        ax.set_title(f"{block_title(*key)}\n{n_text(block)}; error bars: ±1 sample sd "
                     "across seeds", fontsize=9)
    return save_figure(fig, path, dpi=120)


def _mean_history(block_runs: pd.DataFrame, metric: str) -> dict[str, pd.Series]:
    """Per variant: ``metric`` per epoch, averaged over seeds."""
    out = {}
    for label, group in by_variant(block_runs):
        frames = [pd.DataFrame(h).set_index("epoch") for h in group["history"] if h]
        stacked = pd.concat(frames) if frames else pd.DataFrame()
        if metric in stacked:
            out[label] = stacked[metric].groupby(level=0).mean()
    return out


def line_style(label: str) -> dict:
    """Matplotlib keyword arguments that tell this variant's line apart from the others."""
    order = list(VARIANTS.values()).index(label)
    dashes, marker = LINE_STYLES[order % len(LINE_STYLES)]
    step = order / (len(VARIANTS) - 1)
    return {"linestyle": dashes, "marker": marker, "color": VARIANT_COLORS[label],
            "linewidth": WIDEST - step * (WIDEST - NARROWEST),
            "markersize": BIGGEST - step * (BIGGEST - SMALLEST),
            "markerfacecolor": "none", "alpha": 0.8}


def _curve_metric(block_runs: pd.DataFrame) -> tuple[str, str]:
    """``val/top1`` (holdout protocol), or ``test/top1`` per epoch (official protocol)."""
    keys = {k for h in block_runs["history"] for row in h for k in row}
    if "val/top1" in keys or "test/top1" not in keys:
        return "val/top1", "validation top-1 (%)"
    return "test/top1", "test top-1 (%), every epoch"


def val_curves(table: pd.DataFrame, runs: pd.DataFrame, path: Path) -> Path:
    """Validation top-1 per epoch (test top-1 under the official protocol), one line
    per variant (mean over seeds)."""
    keys = [k for k, _ in table.groupby(BLOCK, sort=False)]
    fig, axes = grid(len(keys))
    for ax, key in zip(axes, keys):
        done = completed_runs(runs, key)
        metric, ylabel = _curve_metric(done)
        architecture = block_architecture(done) if len(done) else "vit"
        for label, hist in _mean_history(done, metric).items():
            ax.plot(hist.index, 100 * hist, label=own_name(label, architecture),
                    **line_style(label))
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        seeds = f"mean over {seeds_text(done['seed'])}" if len(done) else "no completed run"
        ax.set_title(f"{block_title(*key)}\n{ylabel} per variant, {seeds}", fontsize=9)
        if ax.get_legend_handles_labels()[0]:  # a block whose runs all failed has no curve
            ax.legend(fontsize=7)
    return save_figure(fig, path, dpi=120)


def html_figures(images: list[Path]) -> str:
    """The figures embedded in the HTML report (data URIs: the page stands alone)."""
    if not images:
        return ""
    parts = ["<h2>Figures</h2>"]
    for image in images:
        data = base64.b64encode(read_bytes(image, FIGURE_LIMIT)).decode("ascii")
        text = CAPTIONS.get(image.stem) or (
            "Attention maps of the probe images, per variant." if image.stem.startswith(
                "attention_maps") else image.stem)
        parts.append(f"<figure><img src='data:image/png;base64,{data}' "
                     f"alt='{html.escape(image.stem)}' style='max-width:100%'>"
                     f"<figcaption>{html.escape(text)}</figcaption></figure>")
    return "\n".join(parts) + "\n"
