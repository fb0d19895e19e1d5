"""Tests of ablation/data/: loaders, raw files, fingerprints. (tests/data/ holds data files.)"""
