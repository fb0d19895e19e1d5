"""The numbers of the report, as DataFrames (percent, full precision): the
comparison (one row per block and variant) and the factorial effects."""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from ablation.config import SWITCHES
from ablation.config.choices import ARCHITECTURES
from ablation.config.switches import REGISTRY, factor_labels, tied_variants, variants
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


def blocks(runs: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    """(dataset, model, protocol, setting), runs: by dataset, then the architectures in
    the paper's order (ViT, T2T, CaiT, PiT, Swin), then by name."""
    rank = {name: i for i, name in enumerate(ARCHITECTURES)}

    def order(group):
        return str(group[0][0]), rank.get(group[1]["architecture"].iloc[0], len(rank))
    return sorted(runs.groupby(BLOCK, sort=True, dropna=False), key=order)


def comparison(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per block and variant, in the paper's order, missing variants
    included; accuracies and gaps (paired by seed against the block's ViT, with
    their t-interval, p and Holm-adjusted p) in percentage points."""
    out = []
    for key, block in blocks(runs):
        frame = pd.DataFrame(_block_rows(block, *key))
        for name in ("top1", "top5"):
            frame[f"d_{name}_p_holm"] = holm(frame[f"d_{name}_p"])
        out.append(power.add_power(frame))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def _status(completed: int, statuses: pd.Series) -> str:
    """``ok`` once a run completed, else ``failed``, ``interrupted`` or ``missing``."""
    return "ok" if completed else next(
        (s for s in ("failed", "interrupted") if (statuses == s).any()), "missing")


NO_GAP = {"gap": np.nan, "low": np.nan, "high": np.nan, "pairs": 0, "no_spread": False,
          "p": np.nan, "sd": np.nan}


def _mean_sd(row: dict, name: str, values: pd.Series) -> None:
    row[f"{name}_mean"] = values.mean() if len(values) else np.nan
    row[f"{name}_std"] = values.std(ddof=1) if len(values) > 1 else np.nan


def summarise(row: dict, name: str, values: pd.Series, base: pd.Series, is_base: bool) -> dict:
    """Put the mean, sd and paired gap to ``base`` (indexed by seed) of one variant's
    per-seed ``values`` into ``row`` as ``<name>_mean`` ... ``d_<name>_high``; the gap."""
    _mean_sd(row, name, values)
    gap = NO_GAP if is_base or base.empty or not len(values) else paired_gap(values, base)
    row[f"d_{name}"], row[f"d_{name}_low"], row[f"d_{name}_high"] = (
        gap["gap"], gap["low"], gap["high"])
    return gap


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
               "architecture": block["architecture"].iloc[0], "variant": VARIANTS[variant],
               **dict(zip(SWITCHES, variant)),
               "n": len(ok), "n_failed": int((mine["status"] == "failed").sum()),
               "n_interrupted": int((mine["status"] == "interrupted").sum()),
               "status": _status(len(ok), mine["status"])}
        for metric, name in (("test_top1", "top1"), ("test_top5", "top5")):
            gap = summarise(row, name, 100 * ok[metric], 100 * base[metric],
                            variant == BASELINE)
            row[f"d_{name}_no_spread"] = gap["no_spread"]
            row[f"d_{name}_p"], row[f"d_{name}_sd"] = gap["p"], gap["sd"]
            row["pairs"] = gap["pairs"]
            correct = ok[f"{metric}_correct"]
            row[f"{name}_correct"] = correct.mean() if correct.notna().all() else np.nan
            _mean_sd(row, f"best_{name}", 100 * ok[f"best_{metric}"].dropna())
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
        row["code"] = " | ".join(sorted(set(ok["code"].dropna())))
        row["code_resumed_under_other"] = bool(ok["code_resumed_under_other"].any())
        rows.append(row)
    return rows


def _tuned(ok: pd.DataFrame, mine: pd.DataFrame) -> dict:
    """A tuned final variant's search (:mod:`ablation.report.tuned_block`)."""
    runs = ok if len(ok) else mine
    tuned = runs[runs["tuning"].map(lambda e: isinstance(e, dict))]
    if tuned.empty:
        return {"tuned_values": None, "tuned_val_top1": np.nan, "tuned_trials": np.nan,
                "tuned_budget": np.nan, "tuning": None, "final_seeds": None}
    first = tuned.iloc[0]
    return {"tuned_values": first["tuned_values"], "final_seeds": sorted(map(int, ok.index)),
            "tuned_val_top1": 100 * float(first["tuned_val_top1"]),
            "tuned_trials": first["tuned_trials"], "tuned_budget": first["tuned_budget"],
            "tuning": first["tuning"]}


def _published(mine: pd.DataFrame, label: str, protocol: str) -> dict:
    """The paper's top-1 for this variant, where the preset names one and the block
    measures what the paper did (the official protocol)."""
    entries = [e for e in mine["published"] if isinstance(e, dict)]
    if protocol != "official" or not entries or label not in entries[0]["top1"]:
        return {"paper_top1": np.nan, "paper_source": None}
    return {"paper_top1": float(entries[0]["top1"][label]), "paper_source": entries[0]["source"]}


def factorial_design(block: pd.DataFrame) -> list[str] | None:
    """The factors of a full factorial in this block's completed runs (2^3, or 2^2
    with the temperature tied to the mask), or None."""
    done = block[block["status"] == "completed"]
    present = set(switch_key(done))
    if set(VARIANTS) <= present:
        return list(SWITCHES)
    if tied(done) and set(PAPER_FOUR) <= present:
        return [s.key for s in REGISTRY if not s.follows]
    return None


EFFECT_COLUMNS = ("effect", "low", "high", "p_value", "p_holm", "sd", "no_spread")


def effects_table(key, block: pd.DataFrame, factors: list[str], measures: dict[str, str],
                  joiner: str) -> pd.DataFrame | None:
    """The factorial effects of ``block`` on each measure (name -> column), one row per
    term (its factors' labels joined by ``joiner``); None where not estimable."""
    fitted = {name: factorial_effects(block, factors, column) for name, column in measures.items()}
    if any(e is None for e in fitted.values()):
        return None
    first = next(iter(fitted.values()))  # every fit lists the same terms in one order
    columns = [effects[list(EFFECT_COLUMNS)].add_prefix(f"{name}_")
               for name, effects in fitted.items()]
    table = pd.concat([first[["term", "order"]], *columns], axis=1)
    labels = factor_labels(factors)
    table["term"] = [joiner.join(labels[f] for f in t.split(" x ")) for t in table["term"]]
    for i, (column, value) in enumerate(zip(BLOCK, key)):
        table.insert(i, column, value)
    table["seeds"] = first["seeds"].to_numpy()
    return table


def factorial(runs: pd.DataFrame) -> pd.DataFrame:
    """Main effects and interactions per block holding a full factorial (percentage
    points), from the seeds that hold every cell; a block where none does gets a
    warning and its key in ``attrs["not_estimable"]``."""
    out, not_estimable = [], []
    for key, block in blocks(runs):
        factors = factorial_design(block)
        if factors is None:
            continue
        done = block[block["status"] == "completed"]
        done = done.assign(test_top1=100 * done["test_top1"], test_top5=100 * done["test_top5"])
        table = effects_table(key, done, factors, {"top1": "test_top1", "top5": "test_top5"},
                              " x ")
        where = " x ".join(str(k) for k in key if k)
        if table is None:
            not_estimable.append(key)
            log.warning("%s: factorial effects left out: no seed has a completed run of "
                        "every variant, so the switches cannot be told apart from the seed",
                        where)
            continue
        fitted = int(table["seeds"].iloc[0])
        if fitted < done["seed"].nunique():
            log.warning("%s: factorial effects from the %d seed(s) that have every variant; "
                        "%d other seed(s) left out of the fit", where, fitted,
                        done["seed"].nunique() - fitted)
        out.append(table)
    effects = pd.concat(out, ignore_index=True) if out else pd.DataFrame()
    effects.attrs["not_estimable"] = not_estimable
    return effects
