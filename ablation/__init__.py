"""vit-ablation: how much each locality trick buys a ViT trained from scratch.

The three switches of Lee, Lee & Song (arXiv 2112.13492) are config keys
``spt``, ``lsa`` and ``learnable_temperature``; the layers implementing them
are in :mod:`ablation.layers` (SPT) and :mod:`ablation.attention` (LSA,
temperature), and :func:`ablation.model.build_model` is the
one place they reach the model.
"""
__version__ = "0.1.0"
