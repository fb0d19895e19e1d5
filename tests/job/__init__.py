"""Tests of ablation/job/: one job's life (locks, stops, resume)."""
