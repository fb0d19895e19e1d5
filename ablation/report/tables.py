"""The numbers of the report, as DataFrames (percent, full precision).

:func:`comparison` gives one row per block (dataset x model x setting) and
variant, in the paper's order, including variants that are missing, only
failed or only interrupted; :func:`factorial` gives each switch's effect and interactions where a
block holds a full factorial. Formatting lives in :mod:`ablation.report.render`.
"""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from ablation.config import SWITCHES
from ablation.config.switches import REGISTRY
from ablation.config.switches import factor_labels, tied_variants, variants
from ablation.report import power
from ablation.report.stats import factorial_effects, holm, paired_gap

log = logging.getLogger(__name__)

# the switches' values (in SWITCHES order) -> label, in the order the table shows them
VARIANTS: dict[tuple[bool, ...], str] = variants()
BASELINE = (False,) * len(SWITCHES)
# where each following switch takes the value it follows: the paper's four
PAPER_FOUR = tied_variants()
# Runs are compared only within a block; the protocol is part of it, so a
# holdout run and an official-protocol run never share a table.
BLOCK = ["dataset", "model", "protocol", "setting"]


def switch_key(runs: pd.DataFrame) -> pd.Series:
    return pd.Series(list(zip(*(runs[k].astype(bool) for k in SWITCHES))), index=runs.index)


def tied(block: pd.DataFrame) -> bool:
    """Whether every following switch took the value it follows in every run
    (``learnable_temperature`` left at ``${lsa}``)."""
    return all(bool((block[s.key] == block[s.follows]).all()) for s in REGISTRY if s.follows)


def expected_variants(block: pd.DataFrame) -> list[tuple[bool, ...]]:
    """The paper's four when the temperature always follows the mask, else all eight."""
    return PAPER_FOUR if tied(block) else list(VARIANTS)


def blocks(runs: pd.DataFrame):
    """(dataset, model, protocol, setting), runs: in a stable order."""
    return runs.groupby(BLOCK, sort=True, dropna=False)


def comparison(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per block and variant; accuracies and gaps in percentage points.

    Gaps are paired by seed against the block's plain ViT; ``*_low``/``*_high``
    are the paired 95 % t-interval (n - 1 df; NaN with fewer than two pairs) and
    ``*_no_spread`` is true where every paired difference was the same (a
    zero-wide interval that measures nothing). ``test_images`` is the block's
    test-set size (one image = 100 / test_images points).
    ``status`` is ``ok``, ``failed`` (runs exist, none completed, one failed),
    ``interrupted`` (runs exist, none completed, none failed: a rerun resumes them) or
    ``missing``; ``n_failed`` and ``n_interrupted`` count the runs that did not complete.

    Also: ``d_*_p`` (the paired t-test's p) and ``d_*_p_holm`` (Holm-adjusted
    across the block's Δ rows, one family per metric), ``d_*_sd`` (sd of the
    paired differences), ``d_*_images`` (the mean gap in test images),
    ``*_correct`` (mean correct test images per seed), ``best_*`` (the official
    protocol's best epoch, mean and sd), ``timed_steps`` (the fewest training
    steps a variant's speed was timed over) and the power columns of
    :func:`ablation.report.power.add_power`.
    """
    out = []
    for (dataset, model, protocol, setting), block in blocks(runs):
        rows = _block_rows(block, dataset, model, protocol, setting)
        frame = pd.DataFrame(rows)
        for name in ("top1", "top5"):
            frame[f"d_{name}_p_holm"] = holm(frame[f"d_{name}_p"])
        out.append(power.add_power(frame))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def _status(completed: int, statuses: pd.Series) -> str:
    """A variant's state in its block: ``ok`` once a run completed; else ``failed``
    where one failed, ``interrupted`` where runs were only stopped (a rerun resumes
    them), ``missing`` where there is no run."""
    if completed:
        return "ok"
    for status in ("failed", "interrupted"):
        if (statuses == status).any():
            return status
    return "missing"


def _block_rows(block: pd.DataFrame, dataset, model, protocol, setting) -> list[dict]:
    rows = []
    keys = switch_key(block)
    done = block[block["status"] == "completed"]
    done_keys = keys[done.index]
    base = done[done_keys == BASELINE].set_index("seed")
    for variant in expected_variants(block):
        mine = block[keys == variant]
        ok = done[done_keys == variant].set_index("seed")
        row = {"dataset": dataset, "model": model, "protocol": protocol, "setting": setting,
               "variant": VARIANTS[variant],
               **dict(zip(SWITCHES, variant)),
               "n": len(ok), "n_failed": int((mine["status"] == "failed").sum()),
               "n_interrupted": int((mine["status"] == "interrupted").sum()),
               "status": _status(len(ok), mine["status"])}
        for metric, name in (("test_top1", "top1"), ("test_top5", "top5")):
            values = 100 * ok[metric]
            row[f"{name}_mean"] = values.mean() if len(ok) else np.nan
            row[f"{name}_std"] = values.std(ddof=1) if len(ok) > 1 else np.nan
            if variant == BASELINE or base.empty or not len(ok):
                gap = {"gap": np.nan, "low": np.nan, "high": np.nan, "pairs": 0,
                       "no_spread": False, "p": np.nan, "sd": np.nan}
            else:
                gap = paired_gap(values, 100 * base[metric])
            row[f"d_{name}"], row[f"d_{name}_low"], row[f"d_{name}_high"] = (
                gap["gap"], gap["low"], gap["high"])
            row[f"d_{name}_no_spread"] = gap["no_spread"]
            row[f"d_{name}_p"], row[f"d_{name}_sd"] = gap["p"], gap["sd"]
            row["pairs"] = gap["pairs"]
            correct = ok[f"{metric}_correct"]
            row[f"{name}_correct"] = correct.mean() if correct.notna().all() else np.nan
            best = 100 * ok[f"best_{metric}"].dropna()
            row[f"best_{name}_mean"] = best.mean() if len(best) else np.nan
            row[f"best_{name}_std"] = best.std(ddof=1) if len(best) > 1 else np.nan
        row["params"] = ok["params"].iloc[0] if len(ok) else np.nan
        trainable = ok["trainable_params"].dropna()  # older records lack it
        row["trainable_params"] = trainable.iloc[0] if len(trainable) else np.nan
        sizes = done["test_images"].dropna()
        row["test_images"] = sizes.iloc[0] if len(sizes) else np.nan
        for name in ("top1", "top5"):
            row[f"d_{name}_images"] = round(row[f"d_{name}"] * row["test_images"] / 100, 6)
        row["timed_steps"] = ok["timed_steps"].min() if len(ok) else np.nan
        row["images_per_s"] = ok["train_images_per_s"].mean() if len(ok) else np.nan
        row["train_seconds"] = ok["train_seconds"].mean() if len(ok) else np.nan
        row.update(_tuned(ok, mine), **_published(mine, VARIANTS[variant], protocol))
        row["code"] = " | ".join(sorted(set(ok["code"].dropna()))) if "code" in ok else ""
        row["code_resumed_under_other"] = bool(ok.get("code_resumed_under_other",
                                                      pd.Series(dtype=bool)).any())
        rows.append(row)
    return rows


def _tuned(ok: pd.DataFrame, mine: pd.DataFrame) -> dict:
    """A tuned final variant's search (:mod:`ablation.report.tuned_block`): its values,
    the best trial's validation top-1 (percent), the trials run and the budget."""
    runs = ok if len(ok) else mine
    tuned = runs[runs["tuning"].map(lambda e: isinstance(e, dict))] if "tuning" in runs \
        else runs.iloc[:0]
    if tuned.empty:
        return {"tuned_values": None, "tuned_val_top1": np.nan, "tuned_trials": np.nan,
                "tuned_budget": np.nan, "tuning": None, "final_seeds": None}
    first = tuned.iloc[0]
    return {"tuned_values": first["tuned_values"], "final_seeds": sorted(map(int, ok.index)),
            "tuned_val_top1": 100 * float(first["tuned_val_top1"]),
            "tuned_trials": first["tuned_trials"], "tuned_budget": first["tuned_budget"],
            "tuning": first["tuning"]}


def _published(mine: pd.DataFrame, label: str, protocol: str) -> dict:
    """The paper's top-1 for this variant, where the runs' preset names one and the
    block measures what the paper did (the official protocol's best epoch)."""
    entries = [e for e in mine.get("published", pd.Series(dtype=object)) if isinstance(e, dict)]
    if protocol != "official" or not entries or label not in entries[0]["top1"]:
        return {"paper_top1": np.nan, "paper_source": None}
    return {"paper_top1": float(entries[0]["top1"][label]), "paper_source": entries[0]["source"]}


def factorial_design(block: pd.DataFrame) -> list[str] | None:
    """The factors of a full factorial in this block's completed runs, or None.

    With the temperature tied to the mask in every run, LSA (mask + temp.)
    is one factor and the design is 2^2 over ``spt`` and ``lsa``; with all
    eight combinations completed it is 2^3.
    """
    done = block[block["status"] == "completed"]
    present = set(switch_key(done))
    if set(VARIANTS) <= present:
        return list(SWITCHES)
    if tied(done) and set(PAPER_FOUR) <= present:
        return [s.key for s in REGISTRY if not s.follows]
    return None


def factorial(runs: pd.DataFrame) -> pd.DataFrame:
    """Main effects and interactions per block holding a full factorial (percentage points).

    Only seeds that hold every cell of the factorial are fitted (column
    ``seeds``). A block whose effects cannot be estimated (no seed holds the
    full factorial, e.g. the ViT run with seed 1 and the others with seed 0,
    where the switches are confounded with the seed) gets no effects and one
    warning; its key is listed in ``attrs["not_estimable"]`` so the rendered
    report can say why.
    """
    out, not_estimable = [], []
    for (dataset, model, protocol, setting), block in blocks(runs):
        factors = factorial_design(block)
        if factors is None:
            continue
        done = block[block["status"] == "completed"]
        per_metric = {}
        for metric, name in (("test_top1", "top1"), ("test_top5", "top5")):
            scaled = done.assign(**{metric: 100 * done[metric]})
            per_metric[name] = factorial_effects(scaled, factors, metric)
        if any(e is None for e in per_metric.values()):
            key = (dataset, model, protocol, setting)
            not_estimable.append(key)
            log.warning("%s: factorial effects left out: no seed has a completed run of "
                        "every variant, so the switches cannot be told apart from the seed",
                        " x ".join(str(k) for k in key if k))
            continue
        fitted = int(per_metric["top1"]["seeds"].iloc[0])
        if fitted < done["seed"].nunique():
            log.warning("%s: factorial effects from the %d seed(s) that have every variant; "
                        "%d other seed(s) left out of the fit", " x ".join(
                            str(k) for k in (dataset, model, protocol, setting) if k),
                        fitted, done["seed"].nunique() - fitted)
        per_metric = {k: v.set_index("term") for k, v in per_metric.items()}
        table = per_metric["top1"][["order"]].copy()
        for name, effects in per_metric.items():
            for col in ("effect", "low", "high", "p_value", "p_holm", "sd", "no_spread"):
                table[f"{name}_{col}"] = effects[col]
        table = table.reset_index()
        labels = factor_labels(factors)
        table["term"] = [" x ".join(labels[f] for f in t.split(" x ")) for t in table["term"]]
        table.insert(0, "setting", setting)
        table.insert(0, "protocol", protocol)
        table.insert(0, "model", model)
        table.insert(0, "dataset", dataset)
        table["seeds"] = per_metric["top1"]["seeds"].to_numpy()
        out.append(table)
    effects = pd.concat(out, ignore_index=True) if out else pd.DataFrame()
    effects.attrs["not_estimable"] = not_estimable
    return effects
