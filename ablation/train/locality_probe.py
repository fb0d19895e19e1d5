"""Locality diagnostics: does the attention become more local and sharper, as the paper says?

On a fixed probe set of test images (the same for every run of a dataset), in
inference mode, for every attention layer and head:

- ``entropy``: mean over queries and images of -sum_j p_ij ln p_ij (nats);
- ``normalized_entropy``: the same divided by ln(number of keys the query may
  attend): N, or N - 1 with the LSA diagonal mask, so uniform attention is 1
  in every variant;
- ``mean_distance_px``: mean over patch queries and images of
  sum_j p_ij d(i, j), d the distance between patch centres in pixels of the
  model's input (after resizing), class token left out and the remaining
  weights renormalised (Dosovitskiy et al. 2021, Fig. 7);
- ``self_attention``: mean p_ii (exactly 0 with the LSA mask).

The weights come from the model's own layers (never a second implementation
of attention), reduced to per-head sums inside one compiled forward pass.
"""
from __future__ import annotations

import io
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

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


def blocks(model: keras.Model) -> list[TransformerBlock]:
    """The model's self-attention blocks over the patch tokenizer's grid, in depth
    order (CaiT's class-attention blocks, whose class token attends to the patches,
    have no map to probe; PiT's blocks after a pooling see a coarser grid). None of
    Swin's: they attend within windows, which the probe's whole-grid maps do not
    measure, so a Swin run has no diagnostics."""
    found = [layer for layer in model.layers if isinstance(layer, TransformerBlock)
             and not layer.class_attention and not isinstance(layer, SwinBlock)]
    return [block for block in found if block.input.shape == found[0].input.shape]


def patch_geometry(model: keras.Model) -> tuple[int, int, int]:
    """(rows, cols, patch_size) of the patch grid the model sees (after resizing)."""
    tokenizer = model.get_layer("patch_tokenizer")
    height, width = tokenizer.input.shape[1:3]
    p = tokenizer.patch_size
    return height // p, width // p, p


def patch_distances(rows: int, cols: int, patch_size: int) -> np.ndarray:
    """(P, P) Euclidean distances between patch centres, in input pixels, row-major."""
    r, c = np.divmod(np.arange(rows * cols), cols)
    centres = patch_size * np.stack([r + 0.5, c + 0.5], axis=1)
    return np.linalg.norm(centres[:, None, :] - centres[None, :, :], axis=-1)


def query_sums(weights, distances, num_prefix: int, masked: bool) -> dict:
    """Per-image, per-head sums over queries of (batch, heads, N, N) attention weights,
    as (batch, heads) tensors: entropy, normalised entropy and self-attention over
    all queries, mean distance over the patch queries (``num_prefix`` class tokens
    left out, the rest renormalised); ``distances`` is (P, P)."""
    w = ops.cast(weights, "float32")
    n = w.shape[-1]
    keys = n - 1 if masked else n
    log_keys = math.log(keys) if keys > 1 else 1.0
    plogp = ops.where(w > 0, w * ops.log(ops.maximum(w, 1e-30)), 0.0)
    entropy = ops.sum(-ops.sum(plogp, axis=-1), axis=-1)              # (B, H)
    self_weight = ops.sum(ops.diagonal(w, axis1=-2, axis2=-1), axis=-1)
    patches = w[:, :, num_prefix:, num_prefix:]                       # (B, H, P, P)
    mass = ops.sum(patches, axis=-1)
    dist = ops.sum(patches * ops.convert_to_tensor(np.asarray(distances, "float32")), axis=-1)
    distance = ops.sum(dist / ops.maximum(mass, 1e-30), axis=-1)
    return {"entropy": entropy, "normalized_entropy": entropy / log_keys,
            "self_attention": self_weight, "mean_distance_px": distance}


def centre_map(weights, num_prefix: int, rows: int, cols: int):
    """Head-averaged attention of the centre patch over the patches, (batch, P),
    renormalised without the class token."""
    centre = num_prefix + (rows // 2) * cols + cols // 2
    row = ops.mean(ops.cast(weights, "float32")[:, :, centre, num_prefix:], axis=1)
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
    layers (wrapped, so their names do not clash across blocks in the sub-model)."""

    def __init__(self, block: TransformerBlock, distances: np.ndarray, rows: int, cols: int,
                 keep_map: bool, **kwargs):
        super().__init__(**kwargs)
        self.block = block
        self.distances = np.asarray(distances, "float32")
        self.rows, self.cols, self.keep_map = rows, cols, keep_map

    def call(self, tokens):
        prefix = tokens.shape[1] - self.rows * self.cols
        attention = self.block.attention
        # attention_weights, with the softmax in float32 under mixed precision
        logits = attention.attention_logits(self.block.attention_norm(tokens))
        weights = ops.softmax(ops.cast(logits, "float32"), axis=-1)
        out = query_sums(weights, self.distances, prefix, attention.mask_diagonal)
        if self.keep_map:
            out["map"] = centre_map(weights, prefix, self.rows, self.cols)
        return out


def statistics_model(model: keras.Model, maps: Sequence[int] = ()) -> keras.Model:
    """A functional model on the model's own graph and weights: images ->
    ``"<i>/<quantity>"`` (batch, heads) for every block, and ``"<i>/map"`` (batch, P)
    for the blocks in ``maps``."""
    rows, cols, patch = patch_geometry(model)
    distances = patch_distances(rows, cols, patch)
    outputs = {}
    for i, block in enumerate(blocks(model)):
        stats = BlockStatistics(block, distances, rows, cols, i in maps,
                                name=f"locality_{block.name}")(block.input)
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
        found = blocks(model)
        # One sub-model (one trace) for both uses: the maps are cheap to compute.
        depth = len(found)  # maps of the first, middle and last block
        keep = tuple(sorted({0, depth // 2, depth - 1})) if self.attention_maps else ()
        stats = self._statistics_model(model, keep)
        # predict_on_batch per batch (no data adapter); the last padded: one compiled program
        parts = [(n, stats.predict_on_batch(chunk))
                 for n, chunk in padded_chunks(self.images, self.batch_size)]
        out = {k: np.concatenate([np.asarray(p[k])[:n] for n, p in parts]) for k in parts[0][1]}
        num_tokens = found[0].input.shape[1]
        result = {
            "probe_images": int(len(self.images)),
            "layers": [{"layer": i, **per_head_means(
                {q: out[f"{i}/{q}"] for q in QUANTITIES}, num_tokens, rows * cols)}
                for i in range(len(found))],
            "geometry": {"rows": rows, "cols": cols, "patch_size": patch},
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
    """``{probe_images, layers, summary}``: the summary is the mean over layers and heads."""
    layers = [dict(layer) for layer in measured["layers"]]
    summary = {q: float(np.mean([v for layer in layers for v in layer[q]])) for q in QUANTITIES}
    return {"probe_images": int(measured["probe_images"]), "layers": layers, "summary": summary}


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

