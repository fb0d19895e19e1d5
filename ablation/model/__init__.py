"""The Vision Transformer: :func:`build_model` from a run config (the one place
the three switches reach the model), its layers, and its attention."""
from ablation.model.vit import attention_layers, build_model, build_vit, temperatures

__all__ = ["attention_layers", "build_model", "build_vit", "temperatures"]
