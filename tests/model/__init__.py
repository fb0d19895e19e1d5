"""Tests of ablation/model/: the ViT and its layers."""
