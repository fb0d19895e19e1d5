"""The reporter: run records -> the comparison table, factorial effects, plots, W&B.

From Python: ``comparison(load_runs("results/smoke"))``, ``factorial(runs)``; from the
shell: ``python -m ablation.report <sweep folder or results/>``.
"""
import importlib

_EXPORTS = {"ReportError": "load", "load_runs": "load", "comparison": "tables",
            "factorial": "tables", "Report": "write", "write_report": "write"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """The API from its module on first use: importing the package loads no pandas, so
    the command can answer a stop during its imports in one line."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ablation.report' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ablation.report.{_EXPORTS[name]}"), name)
