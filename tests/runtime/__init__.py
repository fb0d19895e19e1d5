"""Tests of ablation/runtime/: the process, its devices, its provenance."""
