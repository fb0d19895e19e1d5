"""Shifted Patch Tokenization (the ``spt`` switch): images to patch tokens."""
from __future__ import annotations

import keras
from keras import layers, ops

from ablation.model.layers import LAYER_NORM_EPSILON
from ablation.model.regularization import Configured

# Order of the four diagonal shifts concatenated after the original image, as
# (rows, cols) offsets read from the source: shifted[i, j] = image[i + dy, j + dx].
# "left-up" moves the picture towards the top-left corner, and so on.
SHIFTS = {
    "left-up": (1, 1),
    "left-down": (-1, 1),
    "right-up": (1, -1),
    "right-down": (-1, -1),
}


def shift_and_stack(images, shift: int):
    """(batch, H, W, C) images and their four copies shifted diagonally by ``shift``
    pixels (:data:`SHIFTS`, zero padded), stacked on channels: (batch, H, W, 5 C)."""
    height, width = images.shape[1], images.shape[2]
    padded = ops.pad(images, [[0, 0], [shift, shift], [shift, shift], [0, 0]])
    views = [images]
    for dy, dx in SHIFTS.values():
        top, left = shift + dy * shift, shift + dx * shift
        views.append(padded[:, top : top + height, left : left + width, :])
    return ops.concatenate(views, axis=-1)


@keras.saving.register_keras_serializable(package="ablation")
class PatchTokenizer(Configured, layers.Layer):
    """Cut an image into non-overlapping patches and project each to a token.

    With ``shifted=True`` (the ``spt`` switch) this is the paper's Shifted Patch
    Tokenization: the image is concatenated (on channels) with four copies
    shifted diagonally by half a patch and zero padded, so every token also
    sees its neighbours' pixels; the flattened patches are layer-normalised
    before the projection. Otherwise it is the plain ViT patch embedding.
    """

    CONFIG = ("patch_size", "dim", "shifted", "epsilon")

    def __init__(self, patch_size: int, dim: int, shifted: bool = False,
                 epsilon: float = LAYER_NORM_EPSILON, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = float(epsilon)
        self.patch_size = int(patch_size)
        self.dim = int(dim)
        self.shifted = bool(shifted)
        self.norm = (layers.LayerNormalization(epsilon=self.epsilon, name="norm")
                     if self.shifted else None)
        self.projection = layers.Dense(self.dim, name="projection")

    def build(self, input_shape):
        height, width, channels = input_shape[1:]
        if height % self.patch_size or width % self.patch_size:
            raise ValueError(f"patch_size {self.patch_size} does not divide the image size "
                             f"{height}x{width}")
        if self.shifted:
            channels *= 1 + len(SHIFTS)
        patch_dim = self.patch_size * self.patch_size * channels
        if self.norm is not None:
            self.norm.build((None, None, patch_dim))
        self.projection.build((None, None, patch_dim))

    def shift_and_stack(self, images):
        """The image and its four half-patch diagonal shifts, on channels."""
        return shift_and_stack(images, self.patch_size // 2)

    def patchify(self, images):
        """(batch, H, W, C) -> (batch, patches, p*p*C), rows then columns, each patch
        flattened as ``tf.image.extract_patches`` does, on every backend."""
        p = self.patch_size
        _, height, width, channels = images.shape
        rows, cols = height // p, width // p
        x = ops.reshape(images, (-1, rows, p, cols, p, channels))
        x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
        return ops.reshape(x, (-1, rows * cols, p * p * channels))

    def call(self, images):
        if self.shifted:
            images = self.shift_and_stack(images)
        patches = self.patchify(images)
        if self.norm is not None:
            patches = self.norm(patches)
        return self.projection(patches)

    def compute_output_shape(self, input_shape):
        rows = input_shape[1] // self.patch_size
        cols = input_shape[2] // self.patch_size
        return (input_shape[0], rows * cols, self.dim)
