"""The reporter: run records -> the comparison table, factorial effects, plots, W&B.

From Python: ``comparison(load_runs("results/smoke"))``, ``factorial(runs)``; from the
shell: ``python -m ablation.report <sweep folder or results/>``.
"""
from ablation.report.load import ReportError, load_runs
from ablation.report.tables import comparison, factorial
from ablation.report.write import Report, write_report

__all__ = ["ReportError", "Report", "comparison", "factorial", "load_runs", "write_report"]
