"""Tests of ablation/augment/: the augmentation layers and the input normalisation."""
