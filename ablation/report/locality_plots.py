"""Locality figures: a quantity per layer for each variant, and attention maps."""
from __future__ import annotations

import logging
import os
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from ablation.config.schema import MAX_ATTENTION_MAPS
from ablation.config.switches import BASELINE_LABEL
from ablation.files import open_file
from ablation.runs.record import ATTENTION_MAPS_FILE
from ablation.report.locality_table import with_diagnostics
from ablation.report.figures import (VARIANT_COLORS, by_variant, dodge, grid, pyplot,
                                     save_figure, variant_label)
from ablation.report.render import block_title
from ablation.report.tables import VARIANTS, blocks

log = logging.getLogger(__name__)

MAPS_LIMIT = 64 << 20  # bytes of one run's attention_maps.npz the report reads, unpacked too
MAX_MAP_BLOCKS = 3  # the probe keeps the first, middle and last block's maps
MAP_ARRAYS = ("images", "blocks", "maps", "rows", "cols", "patch_size")
LAYER_SHARE = 0.7  # of the space between two layers that the variants' dots span


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
    mean over heads and seeds a line, the variants of a layer side by side."""
    diag = with_diagnostics(runs)
    if diag.empty:
        return None
    groups = blocks(diag)
    fig, axes = grid(len(groups), width=9.5, height=4.2)
    for ax, (key, block) in zip(axes, groups):
        variants = by_variant(block)
        for v, (label, mine) in enumerate(variants):
            offset = dodge(v, len(variants), LAYER_SHARE / max(len(variants), 1))
            by_layer: dict[int, list[float]] = {}
            for entry in mine["diagnostics"]:
                for layer in entry["layers"]:
                    by_layer.setdefault(layer["layer"], []).extend(layer[quantity])
            xs = sorted(by_layer)
            for x in xs:
                ax.scatter(np.full(len(by_layer[x]), x + offset), by_layer[x], s=14,
                           color=VARIANT_COLORS[label], alpha=0.55, edgecolors="none")
            ax.plot(np.array(xs) + offset, [np.mean(by_layer[x]) for x in xs], marker="D",
                    markersize=4, color=VARIANT_COLORS[label], label=f"{label} (n={len(mine)})",
                    linestyle="--" if label == BASELINE_LABEL else "-", linewidth=1.4)
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
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path, dpi=120)


def _load_maps(path: str) -> dict | None:
    """A run's saved attention maps, or None (a warning where the file is unusable)."""
    file = Path(path).parent / ATTENTION_MAPS_FILE
    if not os.path.lexists(file):
        return None
    try:
        with open_file(file, MAPS_LIMIT) as f:
            if problem := _shapes_problem(_headers(f)):
                log.warning("%s skipped: not the maps a run saves (%s)", file, problem)
                return None
            f.seek(0)
            with np.load(f, allow_pickle=False) as z:
                arrays = {k: z[k] for k in MAP_ARRAYS}
        if problem := _values_problem(arrays):
            log.warning("%s skipped: %s", file, problem)
            return None
        return arrays
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        log.warning("%s skipped: %s", file, e)
        return None


def _headers(f) -> dict[str, tuple[tuple, np.dtype]]:
    """Each array's (shape, dtype) from its ``.npy`` header, nothing unpacked past it."""
    found = {}
    with zipfile.ZipFile(f) as z:
        for name in MAP_ARRAYS:
            with z.open(f"{name}.npy") as member:
                version = np.lib.format.read_magic(member)
                read = {(1, 0): np.lib.format.read_array_header_1_0,
                        (2, 0): np.lib.format.read_array_header_2_0}.get(version)
                if read is None:
                    raise ValueError(f"{name}.npy: .npy format {version} is not one NumPy writes")
                shape, _, dtype = read(member)
                found[name] = (shape, dtype)
    return found


def _shapes_problem(headers: dict[str, tuple[tuple, np.dtype]]) -> str | None:
    """Why arrays of these shapes are not what a run saves, or None: numeric, at most
    :data:`MAX_ATTENTION_MAPS` images and :data:`MAX_MAP_BLOCKS` blocks, a map per
    image and block, and no more than the read cap once unpacked."""
    (images, _), (blocks, _), (maps, _) = (headers[k] for k in ("images", "blocks", "maps"))
    if not all(dtype.kind in "fiub" for _, dtype in headers.values()):
        return "an array that is not numbers"
    if len(images) < 1 or images[0] > MAX_ATTENTION_MAPS or len(blocks) != 1 \
            or not 1 <= blocks[0] <= MAX_MAP_BLOCKS or len(maps) != 4 \
            or maps[:2] != (images[0], blocks[0]):
        return (f"images {images}, blocks {blocks}, maps {maps}: at most "
                f"{MAX_ATTENTION_MAPS} images, {MAX_MAP_BLOCKS} blocks, one map each")
    unpacked = sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in headers.values())
    if unpacked > MAPS_LIMIT:
        return f"{unpacked:,} bytes unpacked, over the {MAPS_LIMIT:,}-byte cap"
    return None


def _values_problem(arrays: dict[str, np.ndarray]) -> str | None:
    """Why these values are not a run's maps, or None: finite images, block numbers
    counting up from 0, attention weights in [0, 1]."""
    blocks, maps = arrays["blocks"], arrays["maps"]
    if not np.isfinite(arrays["images"]).all():
        return "its images hold values that are not finite"
    if not (np.isfinite(blocks).all() and (blocks == np.round(blocks)).all()
            and (blocks >= 0).all() and (blocks < 2**16).all() and (np.diff(blocks) > 0).all()):
        return f"its block numbers {blocks.tolist()[:5]} are not layers counting up from 0"
    if not (np.isfinite(maps).all() and (maps >= 0).all() and (maps <= 1 + 1e-6).all()):
        return "its maps hold values that are not attention weights in [0, 1]"
    return None


def attention_maps(runs: pd.DataFrame, path: Path) -> list[Path]:
    """Per block: a row per probe image and layer, a column per variant (its lowest
    seed), the centre patch's head-averaged attention over the image."""
    diag = with_diagnostics(runs)
    if diag.empty:
        return []
    plt = pyplot()
    order = list(VARIANTS.values())
    written = []
    groups = blocks(diag)
    for k, (key, block) in enumerate(groups):
        maps = {}
        for _, row in block.sort_values("seed").iterrows():
            label = variant_label(row)
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
                                 figsize=(1.9 * (len(labels) + 1), 1.9 * len(rows) + 0.6),
                                 layout="constrained")
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
        fig.suptitle(title, fontsize=8)
        target = path if len(groups) == 1 else path.with_name(f"{path.stem}_{k}{path.suffix}")
        written.append(save_figure(fig, target, dpi=110))
    return written


def figures(runs: pd.DataFrame, out: Path) -> list[Path]:
    """Every locality figure that the runs' diagnostics allow."""
    made = [per_layer(runs, out / "locality_distance.png", "mean_distance_px"),
            per_layer(runs, out / "locality_entropy.png", "normalized_entropy"),
            *attention_maps(runs, out / "attention_maps.png")]
    return [p for p in made if p is not None]
