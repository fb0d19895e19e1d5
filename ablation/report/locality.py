"""The report's Locality section: is the attention more local with SPT and LSA?

Reads each run's ``diagnostics`` (see :mod:`ablation.diagnostics`) and its
``attention_maps.npz``; runs without them (older records, or
``diagnostics.enabled=false``) are simply left out of this section. Gives:

- :func:`locality_table`: per block and variant, the mean attention distance
  (px) and normalised entropy averaged over layers and heads, mean ± sd over
  seeds, and Δ vs the block's ViT paired by seed with the same interval as
  accuracy (:func:`ablation.report.stats.paired_gap`);
- :func:`locality_effects`: the switches' factorial effects on both
  (:func:`ablation.report.stats.factorial_effects`);
- three figures: distance and entropy per layer (each head a dot, one colour
  per variant), and centre-patch attention maps over the probe images.
"""
from __future__ import annotations

import html
import logging
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from ablation.config import SWITCHES
from ablation.records import ATTENTION_MAPS_FILE
from ablation.report.plots import _pyplot, _variant_label
from ablation.report.render import HTML, LATEX, MARKDOWN, Style, _select, block_title, gap
from ablation.report.stats import factorial_effects, paired_gap
from ablation.report.tables import (BASELINE, BLOCK, FACTOR_LABELS, VARIANTS, _switches, blocks,
                                    expected_variants, factorial_design)

log = logging.getLogger(__name__)

# record quantity -> (column stem, display name, decimals)
MEASURES = {"mean_distance_px": ("distance", "Mean distance (px)", 2),
            "normalized_entropy": ("entropy", "Norm. entropy", 3)}
NOTE = ("Locality, on the same probe test images for every run: mean attention distance in "
        "input pixels (patch centres, class token left out; Dosovitskiy et al. 2021, Fig. 7) "
        "and attention entropy normalised by ln(keys attended) (1 = uniform), each averaged "
        "over layers and heads; mean ± sd over seeds; Δ paired by seed against the plain ViT "
        "with the same interval as accuracy. The paper's claim: SPT and LSA make attention "
        "more local (lower distance) and LSA's temperature sharper (lower entropy). "
        "Mind that the LSA mask moves the weight a token gave itself (distance 0) onto "
        "other patches, which raises the mean distance by itself.")


def with_diagnostics(runs: pd.DataFrame) -> pd.DataFrame:
    """Completed runs that carry diagnostics, with ``distance``/``entropy`` columns
    (means over layers and heads) and ``diagnostics`` (the record's entry)."""
    done = runs[(runs["status"] == "completed") & runs["diagnostics"].notna()].copy()
    for quantity, (stem, _, _) in MEASURES.items():
        done[stem] = [d["summary"][quantity] for d in done["diagnostics"]]
    return done


def locality_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per block and variant (blocks holding diagnostics only)."""
    diag = with_diagnostics(runs)
    rows = []
    for key, block in blocks(runs):
        info = dict(zip(BLOCK, key))
        mine = diag.loc[diag.index.intersection(block.index)]
        if mine.empty:
            continue
        keys = _switches(mine)
        base = mine[keys == BASELINE].set_index("seed")
        for variant in expected_variants(block):
            ok = mine[keys == variant].set_index("seed")
            row = {**info,
                   "variant": VARIANTS[variant], **dict(zip(SWITCHES, variant)), "n": len(ok)}
            for stem, _, _ in MEASURES.values():
                row[f"{stem}_mean"] = ok[stem].mean() if len(ok) else np.nan
                row[f"{stem}_std"] = ok[stem].std(ddof=1) if len(ok) > 1 else np.nan
                g = ({"gap": np.nan, "low": np.nan, "high": np.nan}
                     if variant == BASELINE or base.empty or not len(ok)
                     else paired_gap(ok[stem], base[stem]))
                row[f"d_{stem}"], row[f"d_{stem}_low"], row[f"d_{stem}_high"] = (
                    g["gap"], g["low"], g["high"])
            rows.append(row)
    return pd.DataFrame(rows)


def locality_effects(runs: pd.DataFrame) -> pd.DataFrame:
    """Factorial effects of the switches on distance and entropy, per block with a full design."""
    diag = with_diagnostics(runs)
    out = []
    for key, block in blocks(diag):
        factors = factorial_design(block)
        if factors is None:
            continue
        table = None
        fitted = [factorial_effects(block, factors, stem) for stem, _, _ in MEASURES.values()]
        if any(e is None for e in fitted):  # confounded with the seed: not estimable
            log.warning("%s: locality effects left out: no seed has every variant",
                        " x ".join(str(k) for k in key if k))
            continue
        for (stem, _, _), effects in zip(MEASURES.values(), fitted):
            effects = effects.set_index("term")
            if table is None:
                table = effects[["order"]].copy()
            for col in ("effect", "low", "high", "p_value"):
                table[f"{stem}_{col}"] = effects[col]
        table = table.reset_index()
        labels = dict(FACTOR_LABELS, lsa=FACTOR_LABELS["lsa+temp" if factors == ["spt", "lsa"]
                                                       else "lsa"])
        table["term"] = [" × ".join(labels[f] for f in t.split(" x ")) for t in table["term"]]
        for i, (name, value) in enumerate(zip(BLOCK, key)):
            table.insert(i, name, value)
        table["seeds"] = fitted[0]["seeds"].to_numpy()
        out.append(table)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


# --- text ------------------------------------------------------------------------

HEADER = ["Variant", "n", *(f"{name}" for _, name, _ in MEASURES.values()),
          *(f"Δ{name} vs ViT" for _, name, _ in MEASURES.values())]
EFFECTS_HEADER = ["Term", *(f"Effect on {name[0].lower() + name[1:]} [95% CI]"
                            for _, name, _ in MEASURES.values())]


def _signed(x, decimals: int) -> str:
    """+0.123 / -0.123, and +0.000 for what rounds to zero (never -0.000)."""
    return f"{round(float(x), decimals) + 0.0:+.{decimals}f}"


def _fmt(x, decimals: int) -> str:
    return "" if x is None or not np.isfinite(x) else f"{x:.{decimals}f}"


def _display_rows(block: pd.DataFrame, style: Style) -> list[list[str]]:
    rows = []
    for _, r in block.iterrows():
        cells = [style.escape(r["variant"]), str(r["n"])]
        for stem, _, d in MEASURES.values():
            mean, std = _fmt(r[f"{stem}_mean"], d), _fmt(r[f"{stem}_std"], d)
            cells.append(style.dash if not mean else f"{mean} {style.pm} {std}" if std else mean)
        for stem, _, d in MEASURES.values():
            if r["variant"] == "ViT":
                cells.append("ref.")
            elif not np.isfinite(r[f"d_{stem}"]):
                cells.append(style.dash)
            elif d == 2:
                cells.append(gap(r[f"d_{stem}"], r[f"d_{stem}_low"], r[f"d_{stem}_high"], style))
            else:  # entropies need three decimals
                low, high = r[f"d_{stem}_low"], r[f"d_{stem}_high"]
                text = _signed(r[f"d_{stem}"], 3)
                cells.append(text + (f" [{_signed(low, 3)}, {_signed(high, 3)}]"
                                     if np.isfinite(low) else ""))
        rows.append(cells)
    return rows


def _effect_rows(effects: pd.DataFrame, style: Style) -> list[list[str]]:
    rows = []
    for _, r in effects.iterrows():
        cells = [style.escape(r["term"])]
        for stem, _, d in MEASURES.values():
            e, lo, hi = r[f"{stem}_effect"], r[f"{stem}_low"], r[f"{stem}_high"]
            cells.append(_signed(e, d) + (f" [{_signed(lo, d)}, {_signed(hi, d)}]"
                                          if np.isfinite(lo) else ""))
        rows.append(cells)
    return rows


def _sections(table: pd.DataFrame, effects: pd.DataFrame):
    for key, block in table.groupby(BLOCK, sort=False):
        yield key, block, _select(effects, key)


def markdown(table: pd.DataFrame, effects: pd.DataFrame) -> str:
    """The Locality section (empty when no run carries diagnostics)."""
    if table.empty:
        return ""
    from ablation.report.render import _md_table

    parts = ["", "# Locality", "", NOTE, ""]
    for key, block, mine in _sections(table, effects):
        parts += [f"## Locality: {block_title(*key)}", "",
                  _md_table(HEADER, _display_rows(block, MARKDOWN)), ""]
        if not mine.empty:
            parts += [f"Factorial effects on locality ({mine['seeds'].iloc[0]} seed(s)):", "",
                      _md_table(EFFECTS_HEADER, _effect_rows(mine, MARKDOWN)), ""]
    return "\n".join(parts)


def html_section(table: pd.DataFrame, effects: pd.DataFrame) -> str:
    if table.empty:
        return ""
    from ablation.report.render import _html_table

    parts = [f"<h1>Locality</h1><p>{html.escape(NOTE)}</p>"]
    for key, block, mine in _sections(table, effects):
        parts += [f"<h2>Locality: {html.escape(block_title(*key))}</h2>",
                  _html_table(HEADER, _display_rows(block, HTML))]
        if not mine.empty:
            parts.append(_html_table(EFFECTS_HEADER, _effect_rows(mine, HTML)))
    return "\n".join(parts) + "\n"


def latex(table: pd.DataFrame, effects: pd.DataFrame) -> str:
    if table.empty:
        return ""
    out = [f"% {NOTE}"]
    for key, block, mine in _sections(table, effects):
        out += [r"\begin{table}[t]", r"\centering", r"\small",
                rf"\caption{{Locality: {LATEX.escape(block_title(*key))}}}",
                r"\begin{tabular}{l" + "c" * (len(HEADER) - 1) + "}", r"\toprule",
                " & ".join(LATEX.escape(h) for h in HEADER) + r" \\", r"\midrule",
                *(" & ".join(row) + r" \\" for row in _display_rows(block, LATEX)),
                r"\bottomrule", r"\end{tabular}"]
        if not mine.empty:
            out += [r"\par\medskip", r"\begin{tabular}{lcc}", r"\toprule",
                    " & ".join(LATEX.escape(h) for h in EFFECTS_HEADER) + r" \\", r"\midrule",
                    *(" & ".join(row) + r" \\" for row in _effect_rows(mine, LATEX)),
                    r"\bottomrule", r"\end{tabular}"]
        out += [r"\end{table}", ""]
    return "\n".join(out)


# --- figures ---------------------------------------------------------------------

# One fixed colour per variant, the same in every figure (the paper's four stand apart).
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


def _outline(ax, image: np.ndarray, width: int, height: int) -> None:
    """The image's shapes as white contour lines (brightness at half its range) over a map."""
    gray = image.mean(axis=-1) if image.ndim == 3 else image
    if gray.max() - gray.min() < 1e-9:
        return
    ys = (np.arange(gray.shape[0]) + 0.5) * height / gray.shape[0]
    xs = (np.arange(gray.shape[1]) + 0.5) * width / gray.shape[1]
    ax.contour(xs, ys, gray, levels=[0.5 * (gray.min() + gray.max())], colors="white",
               linewidths=1.0)


def per_layer(runs: pd.DataFrame, path: Path, quantity: str) -> Path | None:
    """``quantity`` per layer for each variant: every head of every seed a dot, the
    mean over heads and seeds a line (the ViT paper's Fig. 7 layout)."""
    diag = with_diagnostics(runs)
    if diag.empty:
        return None
    plt = _pyplot()
    colors = VARIANT_COLORS
    groups = list(diag.groupby(BLOCK, sort=True))
    fig, axes = plt.subplots(len(groups), 1, figsize=(7.5, 4.2 * len(groups)), squeeze=False)
    order = list(VARIANTS.values())
    for ax, (key, block) in zip(axes.ravel(), groups):
        labels = sorted(set(block.apply(_variant_label, axis=1)), key=order.index)
        width = 0.7 / max(len(labels), 1)
        for v, label in enumerate(labels):
            mine = block[block.apply(_variant_label, axis=1) == label]
            offset = (v - (len(labels) - 1) / 2) * width
            by_layer: dict[int, list[float]] = {}
            for entry in mine["diagnostics"]:
                for layer in entry["layers"]:
                    by_layer.setdefault(layer["layer"], []).extend(layer[quantity])
            xs = sorted(by_layer)
            for x in xs:
                ax.scatter(np.full(len(by_layer[x]), x + offset), by_layer[x], s=14,
                           color=colors[label], alpha=0.55, edgecolors="none")
            ax.plot(np.array(xs) + offset, [np.mean(by_layer[x]) for x in xs], marker="D",
                    markersize=4, color=colors[label], label=f"{label} (n={len(mine)})",
                    linestyle="--" if label == "ViT" else "-", linewidth=1.4)
        ax.set_xticks(sorted({layer["layer"] for e in block["diagnostics"]
                              for layer in e["layers"]}))
        ax.set_xlabel("block (layer)")
        if quantity == "mean_distance_px":
            ax.set_ylabel("mean attention distance (input px)")
        else:
            ax.set_ylabel("normalised attention entropy")
            ax.axhline(1.0, color="#999999", linewidth=0.8, linestyle=":")
        ax.set_title(f"{block_title(*key)}: dots = heads, line = mean", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _load_maps(path: str) -> dict | None:
    file = Path(path).parent / ATTENTION_MAPS_FILE
    if not file.is_file():
        return None
    with np.load(file) as z:
        return {k: z[k] for k in z.files}


def attention_maps(runs: pd.DataFrame, path: Path) -> list[Path]:
    """Per block: probe images x (first, middle, last layer) rows, one column per variant
    (its lowest seed), the centre patch's head-averaged attention over the image."""
    diag = with_diagnostics(runs)
    if diag.empty:
        return []
    plt = _pyplot()
    order = list(VARIANTS.values())
    written = []
    groups = list(diag.groupby(BLOCK, sort=True))
    for k, (key, block) in enumerate(groups):
        maps = {}
        for _, row in block.sort_values("seed").iterrows():
            label = _variant_label(row)
            if label not in maps:
                loaded = _load_maps(row["path"])
                if loaded is not None:
                    maps[label] = (loaded, int(row["seed"]))
        if not maps:
            continue
        labels = sorted(maps, key=order.index)
        first = maps[labels[0]][0]
        images, layers = first["images"], [int(b) for b in first["blocks"]]
        rows = [(i, j) for i in range(len(images)) for j in range(len(layers))]
        fig, axes = plt.subplots(len(rows), len(labels) + 1, squeeze=False,
                                 figsize=(1.9 * (len(labels) + 1), 1.9 * len(rows) + 0.6))
        for r, (i, j) in enumerate(rows):
            image = images[i].astype(float)
            image = (image - image.min()) / max(image.max() - image.min(), 1e-9)
            shown = image[..., 0] if image.shape[-1] == 1 else image
            height, width = shown.shape[:2]
            axes[r, 0].imshow(shown, cmap="gray")
            axes[r, 0].set_ylabel(f"image {i}\nblock {layers[j]}", fontsize=8)
            for c, label in enumerate(labels, start=1):
                data = maps[label][0]
                if j >= data["maps"].shape[1] or i >= len(data["maps"]):
                    axes[r, c].set_visible(False)
                    continue
                grid = data["maps"][i, j]
                rows_, cols_ = grid.shape
                ax = axes[r, c]
                ax.imshow(grid, cmap="viridis", vmin=0, vmax=max(float(grid.max()), 1e-12),
                          extent=(0, width, height, 0), interpolation="nearest")
                _outline(ax, image, width, height)
                cy, cx = rows_ // 2, cols_ // 2
                ax.add_patch(plt.Rectangle((cx * width / cols_, cy * height / rows_),
                                           width / cols_, height / rows_, fill=False,
                                           edgecolor="cyan", linewidth=1.2))
                if r == 0:
                    ax.set_title(f"{label}\n(seed {maps[label][1]})", fontsize=8)
            for ax in axes[r]:
                ax.set_xticks([])
                ax.set_yticks([])
        axes[0, 0].set_title("probe image", fontsize=8)
        title = (f"{block_title(*key)}: where the centre patch (cyan box) attends, heads "
                 f"averaged (dark = none, yellow = each map's maximum); white: image outline")
        fig.suptitle(textwrap.fill(title, width=int(24 * (len(labels) + 1))), fontsize=8)
        fig.tight_layout()
        target = path if len(groups) == 1 else path.with_name(f"{path.stem}_{k}{path.suffix}")
        fig.savefig(target, dpi=110)
        plt.close(fig)
        written.append(target)
    return written


def figures(runs: pd.DataFrame, out: Path) -> list[Path]:
    """Every locality figure that the runs' diagnostics allow."""
    made = [per_layer(runs, out / "locality_distance.png", "mean_distance_px"),
            per_layer(runs, out / "locality_entropy.png", "normalized_entropy"),
            *attention_maps(runs, out / "attention_maps.png")]
    return [p for p in made if p is not None]
