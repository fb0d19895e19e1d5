"""The training input pipeline: batches, repeated passes, Mixup/CutMix, soft targets.

Mixing needs the labels, so it lives here, not in the model: a
``keras.utils.PyDataset`` over numpy arrays (every backend), reading no
config (:class:`ablation.train.inputs.Feed` hands it arguments). Under
``augmentation.implementation=official`` the per-image augmentation runs
here too, before the mixing (:mod:`ablation.augment.official`). The mixing
draws as the official code does: one weight or one box per batch, the box
clipped at the border, the label weight the pasted share.

One "epoch" is ``passes`` shuffled passes over the training set (the official
repeated-augmentation sampler). Batch order depends only on the seed and the
epoch, so a resumed run sees the order it would have.

With ``pad``, a short last batch is filled with weight-0 copies of its own
rows after the augmentation and mixing, so XLA compiles one program; the
loss and metrics weigh by sample (:func:`ablation.train.compile.compile_model`),
so the padding changes nothing.
"""
from __future__ import annotations

import math

import keras
import numpy as np

from ablation.augment.official import OfficialAugment


def one_hot(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Integer labels -> float32 one-hot rows (the soft-target form every loss here takes)."""
    return np.eye(num_classes, dtype=np.float32)[np.asarray(labels, dtype=np.int64)]


def pad_rows(array: np.ndarray, size: int) -> np.ndarray:
    """``array`` with copies of its own rows (cyclically) appended up to ``size`` rows.

    Copies rather than zeros: the filler rows go through the model like real
    images, so nothing in them can be NaN or infinite (a weight of 0 times a NaN
    gradient is NaN), and no normalisation sees an out-of-distribution row.
    """
    if int(size) <= len(array):
        return array
    return np.resize(array, (int(size), *np.shape(array)[1:]))


def padded(x: np.ndarray, y: np.ndarray, batch_size: int):
    """(x, y, sample_weight) with the rows rounded up to a multiple of ``batch_size``,
    the weight 1 on the real rows and 0 on the padding. An empty split stays empty."""
    size = math.ceil(len(x) / batch_size) * batch_size
    weights = (np.arange(size) < len(x)).astype(np.float32)
    return pad_rows(x, size), pad_rows(np.asarray(y), size), weights


def padded_chunks(array: np.ndarray, batch_size: int):
    """(real rows, chunk) for consecutive chunks of ``array``, each of the same
    size (``batch_size``, or all the rows if fewer): the last one padded."""
    size = min(int(batch_size), len(array))
    for start in range(0, len(array), size):
        chunk = array[start:start + size]
        yield len(chunk), pad_rows(chunk, size)


class Mixer:
    """Mixup (Beta(alpha, alpha)) or CutMix (Beta(beta, beta)) on a batch, as the official code.

    With probability ``probability`` a batch is mixed, by CutMix or Mixup with
    equal chance (the official recipe: 0.5, alpha = beta = 1); otherwise it
    passes unchanged. The batch is mixed with a permutation of itself and
    every image shares one draw: Mixup blends all images with one weight
    lambda; CutMix pastes one box, centred uniformly and clipped at the image
    border (its side is ``int(side * sqrt(1 - lambda))``), from the partner
    into every image. Targets become ``w * own + (1 - w) * partner`` with
    ``w`` = lambda for Mixup and, for CutMix, the share of pixels not pasted.
    """

    def __init__(self, probability: float = 0.5, mixup_alpha: float = 1.0,
                 cutmix_alpha: float = 1.0, seed: int | None = None):
        self.probability = float(probability)
        self.rng = np.random.default_rng(seed)
        self.mixup_alpha = float(mixup_alpha or 0.0)
        self.cutmix_alpha = float(cutmix_alpha or 0.0)

    def choose(self, rng: np.random.Generator | None = None) -> str | None:
        """``mixup``, ``cutmix`` or None for the next batch."""
        rng = rng or self.rng
        kinds = [k for k, alpha in (("cutmix", self.cutmix_alpha), ("mixup", self.mixup_alpha))
                 if alpha > 0]
        if not kinds or rng.random() >= self.probability:
            return None
        return kinds[int(rng.integers(len(kinds)))]

    @staticmethod
    def cutmix_box(height: int, width: int, lam: float, rng: np.random.Generator):
        """(top, left, bottom, right) of the official box: centre uniform, clipped."""
        cut = math.sqrt(1.0 - lam)
        half_h, half_w = int(height * cut) // 2, int(width * cut) // 2
        cy, cx = int(rng.integers(height)), int(rng.integers(width))
        return (min(max(cy - half_h, 0), height), min(max(cx - half_w, 0), width),
                min(max(cy + half_h, 0), height), min(max(cx + half_w, 0), width))

    def apply(self, kind: str, images: np.ndarray, targets: np.ndarray,
              rng: np.random.Generator | None = None):
        """Mix one batch with ``kind`` drawing from ``rng``; returns numpy (images, targets)."""
        rng = rng or self.rng
        images = np.asarray(images, dtype=np.float32)
        alpha = self.cutmix_alpha if kind == "cutmix" else self.mixup_alpha
        lam = float(rng.beta(alpha, alpha))
        order = rng.permutation(len(images))
        if kind == "cutmix":
            top, left, bottom, right = self.cutmix_box(*images.shape[1:3], lam, rng)
            mixed = images.copy()
            mixed[:, top:bottom, left:right] = images[order, top:bottom, left:right]
            lam = 1.0 - (bottom - top) * (right - left) / (images.shape[1] * images.shape[2])
        else:
            mixed = lam * images + (1.0 - lam) * images[order]
        targets = lam * targets + (1.0 - lam) * targets[order]
        return mixed.astype(np.float32), targets.astype(np.float32)

    def __call__(self, images: np.ndarray, targets: np.ndarray, key: tuple | None = None):
        """Mix (or not) one batch; ``key`` (seed, epoch, batch) makes it reproducible."""
        rng = self.rng if key is None else np.random.default_rng(key)
        kind = self.choose(rng)
        return (images, targets) if kind is None else self.apply(kind, images, targets, rng=rng)


class TrainingBatches(keras.utils.PyDataset):
    """Shuffled training batches: ``passes`` passes per epoch, optional mixing.

    Targets are one-hot float rows when ``soft`` (label smoothing, mixing),
    else the integer labels. ``augment`` (the official per-image augmentation)
    runs before the mixing. With ``pad`` the short last batch is filled and
    every batch has sample weights (see the module's notes).
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, num_classes: int, batch_size: int, *,
                 passes: int = 1, soft: bool = False, mixer: Mixer | None = None,
                 augment: OfficialAugment | None = None, seed: int = 0,
                 initial_epoch: int = 0, pad: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y = x, np.asarray(y)
        self.num_classes = int(num_classes)
        self.batch_size = int(batch_size)
        self.passes = int(passes)
        self.soft = bool(soft or mixer is not None)
        self.mixer = mixer
        self.augment = augment
        self.seed = int(seed)
        self.epoch = int(initial_epoch)
        self.pad = bool(pad)
        self._order()

    def _order(self) -> None:
        rng = np.random.default_rng([self.seed, self.epoch])
        self.order = np.concatenate([rng.permutation(len(self.x)) for _ in range(self.passes)])

    def __len__(self) -> int:
        return math.ceil(len(self.order) / self.batch_size)

    def __getitem__(self, index: int):
        images, targets = self._batch(index)
        return padded(images, targets, self.batch_size) if self.pad else (images, targets)

    def _batch(self, index: int):
        """The real rows of batch ``index``: augmented, then mixed among themselves."""
        rows = self.order[index * self.batch_size:(index + 1) * self.batch_size]
        images = self.x[rows]
        if self.augment is not None:  # per image, before the mixing (the official order)
            images = self.augment(images, np.random.default_rng(
                (self.seed, self.epoch, index, 1)))
        if not self.soft:
            return images, self.y[rows]
        targets = one_hot(self.y[rows], self.num_classes)
        if self.mixer is not None:
            images, targets = self.mixer(images, targets, key=(self.seed, self.epoch, index))
        return images, targets

    def on_epoch_end(self) -> None:
        self.epoch += 1
        self._order()


def training_batches(x, y, num_classes: int, batch_size: int, *, passes: int, soft: bool,
                     mixing: tuple[float, float, float] | None, augment: OfficialAugment | None,
                     workers: int, seed: int, initial_epoch: int = 0,
                     pad: bool = False) -> TrainingBatches:
    """:class:`TrainingBatches` with ``mixing`` = (probability, Mixup alpha, CutMix
    alpha) of a :class:`Mixer` or None; ``workers`` > 1 prepares that many batches at
    once in threads (numpy releases the GIL in its array loops)."""
    mixer = Mixer(*mixing, seed=seed) if mixing is not None else None
    return TrainingBatches(x, y, num_classes, batch_size, passes=passes, soft=soft,
                           mixer=mixer, augment=augment, seed=seed,
                           initial_epoch=initial_epoch, pad=pad, workers=workers,
                           use_multiprocessing=False)
