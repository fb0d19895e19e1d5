"""The Vision Transformers (ViT, T2T, CaiT, PiT, Swin): :func:`build_model` from a run
config (the one place the three switches reach the model), their layers, their attention, and
:func:`load_model` for the trained model a job leaves."""
from ablation.model.build import build_model
from ablation.model.cait import build_cait
from ablation.model.pit import build_pit
from ablation.model.saved import load_model
from ablation.model.swin import build_swin
from ablation.model.t2t import build_t2t
from ablation.model.vit import attention_layers, build_vit, temperatures

__all__ = ["attention_layers", "build_cait", "build_model", "build_pit", "build_swin", "build_t2t",
           "build_vit", "load_model", "temperatures"]
