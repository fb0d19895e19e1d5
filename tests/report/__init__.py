"""Tests of ablation/report/, one module per unit of the reporter."""
