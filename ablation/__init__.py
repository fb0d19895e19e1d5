"""vit-ablation: how much each locality trick buys a ViT trained from scratch.

The three switches of Lee, Lee & Song (arXiv 2112.13492) are the config keys
``spt``, ``lsa`` and ``learnable_temperature``, declared once in
:data:`ablation.config.switches.REGISTRY`; the layers implementing them
are :mod:`ablation.model.tokenizer` (SPT) and :mod:`ablation.model.attention`
(LSA mask, temperature), and :func:`ablation.model.build_model` is the one
place they reach the model. The subpackages follow the flow of a run:
config -> sweep -> job -> train (data, augment, model) -> runs (record, W&B)
-> report; docs/development/README.md draws the layout.
"""
__version__ = "0.1.0"
