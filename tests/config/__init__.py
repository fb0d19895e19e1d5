"""Tests of ablation/config/: composing, validating and naming a run's config."""
