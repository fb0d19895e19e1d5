"""Locality diagnostics: does the attention become more local and sharper, as the paper says?

On a fixed probe set of test images (the same for every run of a dataset), in
inference mode, for every attention layer and head:

- ``entropy``: mean over queries and images of -sum_j p_ij ln p_ij (nats);
- ``normalized_entropy``: each query's entropy divided by ln(number of keys it
  may attend): N, or N - 1 with the LSA diagonal mask, so uniform attention is 1
  in every variant;
- ``mean_distance_px``: mean over patch queries and images of
  sum_j p_ij d(i, j), d the distance between token centres in pixels of the
  model's input (after resizing), class token left out and the remaining
  weights renormalised (Dosovitskiy et al. 2021, Fig. 7);
- ``self_attention``: mean p_ii (exactly 0 with the LSA mask).

Each block on its own grid of token centres (:func:`plan`): PiT's and Swin's
later stages on coarser ones (:func:`grid_geometry`), T2T's token transformers
on their soft split's (split i: pitch 2 ** i px), after T2T's blocks (layer i is
the model's ``block_i``). Swin's within its windows: a query's keys are those
that its window's roll mask leaves it, at their places on the image (before the
roll). Left out and counted in ``left_out``: CaiT's class-attention blocks (one
query, the class token, has no place on the grid). Centre-patch maps: blocks on
the patch grid only (Swin's: the centre patch's attention within its window).

The weights come from the model's own layers (never a second implementation
of attention), reduced to per-head sums inside one compiled forward pass.
"""
from __future__ import annotations

import io
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import keras
import numpy as np
from keras import ops

from ablation.data.batches import padded_chunks
from ablation.model.layers import TransformerBlock
from ablation.model.swin import SwinBlock
from ablation.files import atomic_write, make_folder
from ablation.runs.record import ATTENTION_MAPS_FILE

QUANTITIES = ("entropy", "normalized_entropy", "mean_distance_px", "self_attention")
# The two per-layer means logged every epoch (history rows, W&B).
EPOCH_QUANTITIES = ("mean_distance_px", "normalized_entropy")
PREFIX = "locality"


def probe_indices(num_test: int, count: int, seed: int) -> np.ndarray:
    """The first ``count`` of a permutation of the test split by ``diagnostics.probe_seed``
    (never the run's seed)."""
    return np.random.default_rng(seed).permutation(num_test)[:min(int(count), num_test)]


class Measured(NamedTuple):
    """A block the probe measures: its grid (``rows`` x ``cols`` token centres
    ``pitch`` input pixels apart, after ``prefix`` class tokens), the symbolic tensor
    its statistics read and, where that is not its input tokens, what gives them."""
    block: TransformerBlock
    rows: int
    cols: int
    pitch: int
    prefix: int
    inputs: Any
    tokens: Callable | None = None


def grid_geometry(tokens: int, rows: int, cols: int, pitch: int) -> tuple | None:
    """(rows, cols, pitch, prefix) of a block reading ``tokens`` tokens, from the
    patch grid (``rows``, ``cols``, ``pitch``): each pooling (PiT: 3x3 windows of
    stride 2 centred on every other token, or 2x2 patches) or merging (Swin: 2x2
    tokens) before it halves a side, rounding up, and doubles the pitch; 0 or 1
    tokens left over are a class token before the grid. None: no such grid."""
    while rows * cols > tokens:
        rows, cols, pitch = (rows + 1) // 2, (cols + 1) // 2, 2 * pitch
    prefix = tokens - rows * cols
    return (rows, cols, pitch, prefix) if prefix in (0, 1) else None


def plan(model: keras.Model) -> tuple[list[Measured], dict[str, int]]:
    """The blocks the probe measures (the model's in its order, then T2T's token
    transformers) and, by reason, how many attention blocks it leaves out."""
    rows, cols, pitch = patch_geometry(model)
    found, left_out = [], {}
    for layer in model.layers:
        if not isinstance(layer, TransformerBlock):
            continue
        grid = None if layer.class_attention else grid_geometry(layer.input.shape[1], rows,
                                                                cols, pitch)
        if grid is None:
            why = "class_attention" if layer.class_attention else "no_grid"
            left_out[why] = left_out.get(why, 0) + 1
        else:
            found.append(Measured(layer, *grid, layer.input))
    tokenizer = model.get_layer("patch_tokenizer")
    height, width = tokenizer.input.shape[1:3]
    for i, block in enumerate(getattr(tokenizer, "token_transformers", ()), start=1):
        found.append(Measured(block, height >> i, width >> i, 1 << i, 0,
                              tokenizer.input, lambda x, i=i: tokenizer.levels(x)[0][i - 1]))
    return found, left_out


def blocks(model: keras.Model) -> list[TransformerBlock]:
    """The blocks the probe measures (:func:`plan`)."""
    return [m.block for m in plan(model)[0]]


def patch_geometry(model: keras.Model) -> tuple[int, int, int]:
    """(rows, cols, patch_size) of the patch grid the model sees (after resizing)."""
    tokenizer = model.get_layer("patch_tokenizer")
    height, width = tokenizer.input.shape[1:3]
    p = tokenizer.patch_size
    return height // p, width // p, p


def patch_distances(rows: int, cols: int, pitch: int) -> np.ndarray:
    """(P, P) Euclidean distances between token centres ``pitch`` input pixels apart, row-major."""
    r, c = np.divmod(np.arange(rows * cols), cols)
    centres = pitch * np.stack([r + 0.5, c + 0.5], axis=1)
    return np.linalg.norm(centres[:, None, :] - centres[None, :, :], axis=-1)


def query_sums(weights, distances, num_prefix: int, masked: bool, keys=None) -> dict:
    """Per-image, per-head sums over queries of (..., heads, N, N) attention weights,
    as (..., heads) tensors: entropy, normalised entropy (each query's by ln of the
    keys it may attend: ``keys``, default N, broadcasting against the queries, one
    fewer when ``masked``) and self-attention over all queries, mean distance over
    the patch queries (``num_prefix`` class tokens left out, the rest renormalised);
    ``distances`` is (P, P), or broadcasts against the weights (Swin's windows)."""
    w = ops.cast(weights, "float32")
    keys = np.asarray(w.shape[-1] if keys is None else keys) - int(masked)
    log_keys = np.where(keys > 1, np.log(np.maximum(keys, 1)), 1.0).astype("float32")
    plogp = ops.where(w > 0, w * ops.log(ops.maximum(w, 1e-30)), 0.0)
    entropy = -ops.sum(plogp, axis=-1)                                # (..., H, N)
    self_weight = ops.sum(ops.diagonal(w, axis1=-2, axis2=-1), axis=-1)
    patches = w[..., num_prefix:, num_prefix:]                        # (..., H, P, P)
    mass = ops.sum(patches, axis=-1)
    dist = ops.sum(patches * ops.convert_to_tensor(np.asarray(distances, "float32")), axis=-1)
    distance = ops.sum(dist / ops.maximum(mass, 1e-30), axis=-1)
    return {"entropy": ops.sum(entropy, axis=-1),
            "normalized_entropy": ops.sum(ops.divide(entropy, log_keys), axis=-1),
            "self_attention": self_weight, "mean_distance_px": distance}


def centre_map(weights, num_prefix: int, rows: int, cols: int, places=None):
    """Head-averaged attention of the centre patch over the patches, (batch, P),
    renormalised without the class token; ``weights`` (batch, windows, heads, n, n),
    ``places`` (windows, n) the grid index of each window's tokens (Swin: the map is
    the centre patch's window's, zero elsewhere) or None (one window, all tokens)."""
    centre = (rows // 2) * cols + cols // 2
    window, query = ((0, num_prefix + centre) if places is None
                     else (int(v) for v in np.argwhere(places == centre)[0]))
    row = ops.mean(ops.cast(weights, "float32")[:, window, :, query, num_prefix:], axis=1)
    if places is not None:
        row = ops.matmul(row, np.eye(rows * cols, dtype="float32")[places[window]])
    return row / ops.maximum(ops.sum(row, axis=-1, keepdims=True), 1e-30)


def per_head_means(sums: Mapping, num_tokens: int, num_patches: int) -> dict[str, list[float]]:
    """Per-head means over images and queries from per-image sums (arrays (images, heads))."""
    out = {}
    for q in QUANTITIES:
        per_query = num_patches if q == "mean_distance_px" else num_tokens
        out[q] = [float(v) for v in np.asarray(sums[q], np.float64).mean(axis=0) / per_query]
    return out


class BlockStatistics(keras.layers.Layer):
    """One block's attention statistics from its input tokens, with the block's own
    layers (wrapped, so their names do not clash across blocks in the sub-model);
    a :class:`SwinBlock`'s per window, summed over the windows."""

    def __init__(self, measured: Measured, keep_map: bool, **kwargs):
        super().__init__(**kwargs)
        self.block, self.tokens_of, self.keep_map = measured.block, measured.tokens, keep_map
        self.rows, self.cols, self.prefix = measured.rows, measured.cols, measured.prefix
        distances = patch_distances(measured.rows, measured.cols, measured.pitch)
        self.places, self.keys = None, None
        if isinstance(self.block, SwinBlock):   # the block's own windows of its rolled grid
            index = np.arange(self.rows * self.cols, dtype="float32")[None, :, None]
            self.places = ops.convert_to_numpy(self.block.windows(index))[..., 0].astype(int)
            distances = distances[self.places[:, :, None], self.places[:, None, :]][:, None]
            self.keys = (self.block.mask == 0).sum(axis=-1)      # (windows or 1, 1, n)
        self.distances = np.asarray(distances, "float32")

    def call(self, tokens):
        block, attention = self.block, self.block.attention
        normed = block.attention_norm(tokens if self.tokens_of is None else self.tokens_of(tokens))
        if self.places is None:
            logits = attention.attention_logits(normed)[:, None]
        else:
            logits = attention.attention_logits(block.windows(normed), bias=block.window_bias())
            logits = ops.reshape(logits, (-1, len(self.places), *logits.shape[1:]))
        # attention_weights, with the softmax in float32 under mixed precision
        weights = ops.softmax(ops.cast(logits, "float32"), axis=-1)   # (B, windows, H, n, n)
        out = {q: ops.sum(v, axis=1) for q, v in query_sums(
            weights, self.distances, self.prefix, attention.mask_diagonal, self.keys).items()}
        if self.keep_map:
            out["map"] = centre_map(weights, self.prefix, self.rows, self.cols, self.places)
        return out


def statistics_model(model: keras.Model, maps: Sequence[int] = ()) -> keras.Model:
    """A functional model on the model's own graph and weights: images ->
    ``"<i>/<quantity>"`` (batch, heads) for every measured block, and ``"<i>/map"``
    (batch, P) for the blocks in ``maps``."""
    outputs = {}
    for i, measured in enumerate(plan(model)[0]):
        stats = BlockStatistics(measured, i in maps,
                                name=f"locality_{measured.block.name}")(measured.inputs)
        outputs.update({f"{i}/{q}": v for q, v in stats.items()})
    return keras.Model(model.input, outputs, name="locality_statistics")


class LocalityProbe:
    """Measures a model's attention on the probe ``images`` (``indices`` in the test
    split), ``batch_size`` at a time, keeping ``attention_maps`` images' maps."""

    def __init__(self, images: np.ndarray, indices: np.ndarray, batch_size: int = 64,
                 attention_maps: int = 3):
        self.images = images
        self.indices = np.asarray(indices)
        self.batch_size = int(batch_size)
        self.attention_maps = int(attention_maps)
        self._models: dict = {}
        self.seconds: list[float] = []

    def _statistics_model(self, model: keras.Model, maps: tuple) -> keras.Model:
        key = (id(model), maps)
        if key not in self._models:
            self._models[key] = (model, statistics_model(model, maps))
        return self._models[key][1]

    def measure(self, model: keras.Model, maps: bool = False) -> dict:
        """Per-layer, per-head values (and the centre-patch maps if ``maps``)."""
        started = time.perf_counter()
        rows, cols, patch = patch_geometry(model)
        found, left_out = plan(model)
        # One sub-model (one trace) for both uses: the maps are cheap to compute.
        # Maps of the first, middle and last block on the patch grid
        grid = [i for i, m in enumerate(found) if (m.rows, m.cols, m.pitch) == (rows, cols, patch)]
        keep = (tuple(sorted({grid[0], grid[len(grid) // 2], grid[-1]}))
                if self.attention_maps and grid else ())
        stats = self._statistics_model(model, keep)
        # predict_on_batch per batch (no data adapter); the last padded: one compiled program
        parts = [(n, stats.predict_on_batch(chunk))
                 for n, chunk in padded_chunks(self.images, self.batch_size)]
        out = {k: np.concatenate([np.asarray(p[k])[:n] for n, p in parts]) for k in parts[0][1]}
        result = {
            "probe_images": int(len(self.images)),
            "layers": [{"layer": i, **per_head_means(
                {q: out[f"{i}/{q}"] for q in QUANTITIES}, m.rows * m.cols + m.prefix,
                m.rows * m.cols)} for i, m in enumerate(found)],
            "geometry": {"rows": rows, "cols": cols, "patch_size": patch},
            "left_out": left_out,
        }
        if keep and maps:
            result["maps"] = {i: np.asarray(out[f"{i}/map"][:self.attention_maps])
                              .reshape(-1, rows, cols) for i in keep}
        self.seconds.append(time.perf_counter() - started)
        return result

    def epoch_values(self, model: keras.Model) -> dict[str, float]:
        """Layer means for a history row: ``locality/block_<i>/mean_distance_px``..."""
        measured = self.measure(model)
        row = {}
        for layer in measured["layers"]:
            for q in EPOCH_QUANTITIES:
                row[f"{PREFIX}/block_{layer['layer']}/{q}"] = float(np.mean(layer[q]))
        row[f"{PREFIX}/seconds"] = self.seconds[-1]
        return row

    def final(self, model: keras.Model, output_dir: str | Path | None) -> dict:
        """The record's ``diagnostics``; saves the attention maps beside the record."""
        measured = self.measure(model, maps=bool(self.attention_maps))
        entry = record_entry(measured)
        if output_dir is not None and measured.get("maps"):
            try:
                save_maps(Path(output_dir) / ATTENTION_MAPS_FILE, measured,
                          self.images[:self.attention_maps], self.indices[:self.attention_maps])
            except OSError as e:  # a full disk: the measures are in the record all the same
                entry["unsaved"] = f"{ATTENTION_MAPS_FILE}: {type(e).__name__}: {e}"
        return entry


def record_entry(measured: Mapping) -> dict:
    """``{probe_images, layers, summary}``: the summary is the mean over layers and heads;
    ``left_out`` ({reason: blocks}) where the probe leaves blocks out."""
    layers = [dict(layer) for layer in measured["layers"]]
    summary = {q: float(np.mean([v for layer in layers for v in layer[q]])) for q in QUANTITIES}
    left_out = dict(measured.get("left_out") or {})
    return {"probe_images": int(measured["probe_images"]), "layers": layers, "summary": summary,
            **({"left_out": left_out} if left_out else {})}


def save_maps(path: Path, measured: Mapping, images: np.ndarray, indices: np.ndarray) -> Path:
    """A small compressed .npz: the images, and per kept block their centre-patch maps."""
    order = sorted(measured["maps"])
    geometry = measured["geometry"]
    make_folder(path.parent)
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer, images=np.asarray(images), probe_indices=np.asarray(indices),
        blocks=np.asarray(order), maps=np.stack([measured["maps"][b] for b in order], axis=1)
        .astype(np.float32), rows=geometry["rows"], cols=geometry["cols"],
        patch_size=geometry["patch_size"])
    return atomic_write(path, buffer.getvalue(), fsync=False)


def rows_table(entry: Mapping) -> tuple[list[str], list[list]]:
    """Per-head values as (columns, rows), for a W&B table."""
    return ["layer", "head", *QUANTITIES], [
        [layer["layer"], h, *(layer[q][h] for q in QUANTITIES)]
        for layer in entry["layers"] for h in range(len(layer["entropy"]))]


def summary_metrics(entry: Mapping) -> dict[str, float]:
    """``locality/<quantity>`` summary values for the tracker."""
    return {f"{PREFIX}/{q}": v for q, v in entry["summary"].items()}


def from_config(config: Mapping, x_test: np.ndarray, batch_size: int) -> LocalityProbe | None:
    """The probe a run config asks for (``diagnostics`` group), or None when off."""
    diagnostics = config["diagnostics"]
    if not diagnostics["enabled"]:
        return None
    indices = probe_indices(len(x_test), int(diagnostics["probe_images"]),
                            int(diagnostics["probe_seed"]))
    return LocalityProbe(x_test[indices], indices, batch_size=batch_size,
                         attention_maps=int(diagnostics["attention_maps"]))

