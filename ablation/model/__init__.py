"""The Vision Transformer: :func:`build_model` from a run config (the one place
the three switches reach the model), its layers, its attention, and
:func:`load_model` for the trained model a job leaves."""
from ablation.model.saved import load_model
from ablation.model.vit import attention_layers, build_model, build_vit, temperatures

__all__ = ["attention_layers", "build_model", "build_vit", "load_model", "temperatures"]
