"""Tests of hydra_plugins/vit_ablation/: the launchers, Slurm and the tuned sweep."""
