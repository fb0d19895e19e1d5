"""Benchmarks that print figures: ``python -m benchmarks <what>``. Nothing in
the product imports this package."""
