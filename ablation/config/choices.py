"""The allowed values of the config's enumerated keys: one list each, read by the
schema (refusals), by the code that acts on the value, and by ``--help``."""
from __future__ import annotations

# wandb.mode
WANDB_MODES = ("online", "offline", "disabled")
# trainer.precision: Keras dtype policies (mixed_bfloat16: bf16 compute, fp32 weights).
PRECISIONS = ("float32", "mixed_bfloat16")
# augmentation.implementation (see ablation.augment.chain.build_augmentation):
# official = the per-image recipe in the input pipeline with PIL's semantics.
AUGMENTATION_IMPLEMENTATIONS = ("fused", "keras_layers", "official")
# model.init (see ablation.model.init): Keras' defaults, the official code's, the keras.io example's.
INITIALISATIONS = ("keras", "official", "keras_io")
# trainer.protocol: holdout (validation split, final-epoch test) or official (test every epoch).
PROTOCOLS = ("holdout", "official")
# augmentation.normalization (see ablation.augment.normalization): the training split's
# exact statistics, or the official code's Normalize constants (dataset.official_statistics).
NORMALIZATIONS = ("adapted", "official")
# trainer.epsilon_form (see ablation.train.optimizer): where AdamW adds its epsilon.
EPSILON_FORMS = ("keras", "torch")
# model.architecture (ablation.model.build's builders) -> the name the report gives the
# model's plain variant (SL-<name>: SPT + LSA)
ARCHITECTURES = {"vit": "ViT", "t2t": "T2T", "cait": "CaiT", "pit": "PiT", "swin": "Swin"}
