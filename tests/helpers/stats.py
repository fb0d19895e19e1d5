"""Statistics worked out by hand, to check the reporter's against."""
import numpy as np


def t_interval_by_hand(diffs):
    """mean +- t(0.975, n-1) * sd / sqrt(n), with t from a printed table (n = 3: 4.303)."""
    table = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776}  # two-sided 95 %, df = n - 1
    d = np.asarray(diffs, dtype=float)
    half = table[len(d)] * d.std(ddof=1) / np.sqrt(len(d))
    return d.mean() - half, d.mean() + half
