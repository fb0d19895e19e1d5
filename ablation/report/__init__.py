"""The reporter: run records -> the comparison table, factorial effects, plots, W&B.

From Python (a notebook)::

    from ablation.report import load_runs, comparison, factorial
    runs = load_runs("results/smoke")   # one row per run
    table = comparison(runs)            # one row per variant
    effects = factorial(runs)           # where a full factorial exists

From the shell: ``python -m ablation.report <sweep folder or results/>``.
"""
from ablation.report.load import ReportError, load_runs
from ablation.report.tables import comparison, factorial
from ablation.report.write import Report, write_report

__all__ = ["ReportError", "Report", "comparison", "factorial", "load_runs", "write_report"]
