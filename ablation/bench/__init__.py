"""Benchmarks that print figures: ``python -m ablation.bench <what>``. Nothing in
the product imports this package."""
