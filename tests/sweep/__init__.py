"""Tests of ablation/sweep/: the sweep command."""
