"""What a block's table means, in words printed under it.

The caption says the protocol, what the accuracies are (mean ± sd over n seeds;
final epoch, and under the official protocol the best epoch as the paper
reports it), how the Δ intervals and bold marks are made (paired t,
uncorrected interval, Holm-corrected significance), what one test image is
worth, what the block's seeds could detect (power), and why speed columns are
left out when too few steps were timed.
"""
from __future__ import annotations

import math

import pandas as pd

from ablation.report import power
from ablation.report.stats import CONFIDENCE
from ablation.report.tuning import protocol_sentence

# display column -> comparison column prefix of a gap that may be bold
GAPS = {"ΔTop-1 vs ViT": "d_top1", "ΔTop-5 vs ViT": "d_top5"}
BEST_COLUMNS = {"Best-epoch top-1 (%, paper's measure)": "best_top1",
                "Best-epoch top-5 (%, paper's measure)": "best_top5"}

# Fewer training steps than this (per run, the first epoch of each attempt left out)
# measure start-up, the Python loop and the machine's other load, not the model: the
# same smoke sweep's images/s swings 3x between reruns at a few dozen steps.
MIN_TIMED_STEPS = 200
SPEED_MARK = "†"

PROTOCOLS = {
    "holdout": "validation split held out of training; test accuracy after the final epoch",
    "official": "trained on the whole training set; test set evaluated every epoch",
}


def _finite(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def image_worth(test_images) -> str:
    """``1 test image = 0.01 pp`` for 10,000 test images."""
    if not _finite(test_images) or not test_images:
        return "test-set size unknown (older records)"
    points = 100 / float(test_images)
    text = f"{points:.2g}" if points < 0.1 else f"{points:.3g}"
    return f"1 test image = {text} pp ({int(test_images):,} test images)"


def shows_best_epoch(block: pd.DataFrame) -> bool:
    """Whether the block carries the best-epoch accuracies (official protocol)."""
    return bool(block["best_top1_mean"].notna().any()) if "best_top1_mean" in block else False


def speed_shown(row) -> bool:
    """A variant's images/s is shown unless it was timed over too few steps."""
    steps = row.get("timed_steps")
    return not _finite(steps) or steps >= MIN_TIMED_STEPS


def significant(row, src: str) -> bool:
    """Bold: the Holm-corrected p of the block's family is below 5 % (never for a
    zero-wide interval, which has no test)."""
    p = row.get(f"{src}_p_holm")
    return bool(_finite(p) and p < 1 - CONFIDENCE and not row[f"{src}_no_spread"])


SYNTHETIC_NOTE = ("SYNTHETIC DATA (dataset=synthetic): random images and labels, for timing "
                  "only; every accuracy and gap below is chance and means nothing.")


def _as_is(text: str) -> str:
    return text


def caption(block: pd.DataFrame, escape=_as_is) -> str:
    """What the numbers of one block mean; ``escape`` is applied to what comes from the
    records (the protocol, the code), for a format whose caption is not escaped whole."""
    protocol = block["protocol"].iloc[0]
    sizes = block["test_images"].dropna()
    tests = int(block["d_top1_p"].notna().sum()) if "d_top1_p" in block else 0
    parts = [SYNTHETIC_NOTE] if (block["dataset"] == "synthetic").any() else []
    parts += [f"Protocol: {escape(str(protocol))} ({PROTOCOLS.get(protocol, 'as recorded')}).",
             ("Top-1/top-5: test accuracy after the final epoch, mean ± sample standard "
              "deviation over n seeds.")]
    if shows_best_epoch(block):
        parts.append("Best-epoch top-1/top-5: the highest test accuracy over the epochs, the "
                     "measure the paper and its official code report (chosen on the test set, "
                     "so optimistic); mean ± sd over n seeds.")
    parts += [("Δ: paired by seed against the plain ViT, [95 % paired t-interval, n-1 df, "
               "uncorrected] when two or more seeds pair up."),
              (f"Bold: significant at 5 % after Holm's correction across the block's {tests} "
               "Δ test(s) of that metric, so an interval that excludes zero need not be bold."),
              image_worth(sizes.iloc[0] if len(sizes) else None) + "."]
    if block[[f"{c}_no_spread" for c in GAPS.values()]].fillna(False).to_numpy().any():
        parts.append("[x, x]: the paired differences were identical in every seed, so the "
                     "interval has no spread: it measures nothing and is not bold.")
    said = power.sentence(block) if "top1_power_seeds" in block else None
    if said:
        parts.append(said)
    slow = block.apply(lambda r: not speed_shown(r), axis=1).astype(bool)
    hidden = block[slow & (block["status"] == "ok")]
    if len(hidden):
        parts.append(f"{SPEED_MARK} Train img/s left out: timed over only "
                     f"{int(hidden['timed_steps'].min())} training steps per run (fewer than "
                     f"{MIN_TIMED_STEPS}, the first epoch of each attempt excluded), which "
                     "measures start-up and the machine's other load, not the model "
                     "(comparison.csv keeps images_per_s and timed_steps).")
    said = protocol_sentence(block)
    if said:
        parts.append(escape(said))
    sources = sorted({str(s) for s in block.get("paper_source", pd.Series(dtype=object))
                      if isinstance(s, str)})
    if sources:
        parts.append(f"Paper top-1: the best-epoch test top-1 the paper published for this "
                     f"variant and dataset, its official code's measure, beside this block's "
                     f"best-epoch top-1; not a run of this suite ({escape('; '.join(sources))}).")
    said = code_sentence(block, escape)
    if said:
        parts.append(said)
    if (block["trainable_params"].isna() & block["params"].notna()).any():
        parts.append("Params marked * are totals (older records lack the trainable count).")
    return " ".join(parts)


def code_sentence(block: pd.DataFrame, escape=_as_is) -> str:
    """Which code the block's runs came from; said plainly when it is more than one
    (``escape``: as in :func:`caption`)."""
    if "code" not in block:
        return ""
    codes = sorted({escape(c) for cell in block["code"].dropna()
                    for c in str(cell).split(" | ") if c})
    if not codes:
        return ""
    if len(codes) == 1:
        text = f"Code: {codes[0]}."
    else:
        text = (f"MIXED CODE: the runs of this block came from {len(codes)} versions of the "
                f"code ({'; '.join(codes)}), so a gap may reflect the code, not the switch.")
    if block.get("code_resumed_under_other", pd.Series(dtype=bool)).fillna(False).any():
        text += (" Some runs were resumed under other code than they started with "
                 "(code_history in their records).")
    return text


FACTORIAL_NOTE = ("Effects: each switch's main effect and every interaction, computed within "
                  "each seed from that seed's complete set of variants (effect = mean of the "
                  "metric where the term is +1 minus the mean where it is −1; for a switch, the "
                  "change off → on averaged over the other switches), with the 95 % t-interval "
                  "over the seeds (n − 1 df, uncorrected), like the Δ: the seed is the unit, "
                  "because the variants of one seed share its initialisation, data order and "
                  "augmentation draws. Bold: significant at 5 % after Holm's correction across "
                  "the block's terms of that metric.")


def factorial_significant(row, metric: str) -> bool:
    """Bold for an effect: its Holm-corrected p across the block's terms is below 5 %
    (never for a zero-wide interval, which has no test)."""
    p = row.get(f"{metric}_p_holm")
    return bool(_finite(p) and p < 1 - CONFIDENCE and not row[f"{metric}_no_spread"])
