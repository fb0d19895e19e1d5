"""Tests of ablation/runs/: records and W&B tracking."""
