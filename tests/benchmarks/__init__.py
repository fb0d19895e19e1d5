"""Tests of benchmarks/: the benchmarks' plumbing."""
