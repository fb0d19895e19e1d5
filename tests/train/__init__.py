"""Tests of ablation/train/: checkpoints, padding, timings, the locality probe."""
