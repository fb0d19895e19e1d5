"""Per-image augmentation inside the model: normalisation, the fused resize /
flip / rotate / zoom, the official recipe's crop and erasing, RandAugment,
each random layer seeded on its own."""
from ablation.augment.chain import build_augmentation

__all__ = ["build_augmentation"]
