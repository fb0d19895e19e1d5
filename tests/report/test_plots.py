"""The report's figures (ablation/report/plots.py), looked at (matplotlib objects,
rendered text), not only written: they say what they average and what the bars are,
and equal curves stay visible."""
from ablation.report import comparison, load_runs, write_report
from tests.helpers.figures import saved, titles


def test_plots_are_written(four_by_three):
    files = {p.name for p in write_report(four_by_three).files}
    assert {"top1.png", "val_top1.png", "temperature.png"} <= files
    assert (four_by_three / "top1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_equal_curves_stay_visible(four_by_three):
    from ablation.report import plots

    runs = load_runs(four_by_three)
    runs["history"] = [[{"epoch": e, "val/top1": 0.1 * e} for e in (1, 2, 3)]] * len(runs)
    (fig,) = saved(lambda: plots.val_curves(comparison(runs), runs, four_by_three / "v.png"))
    lines = fig.axes[0].get_lines()
    assert len(lines) == 4                       # all equal, on top of each other
    # yet each drawn differently: its own dash pattern AND its own marker ...
    assert len({(line._unscaled_dash_pattern[0],
                 tuple(line._unscaled_dash_pattern[1] or ())) for line in lines}) == 4
    assert len({line.get_marker() for line in lines}) == 4
    # ... and each later line narrower, so the earlier one still shows around it
    widths = [line.get_linewidth() for line in lines]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == 4
    assert all(line.get_alpha() < 1 for line in lines)
    # every one of the eight variants is distinct too
    styles = [plots.line_style(label) for label in plots.VARIANTS.values()]
    assert len({str(s["linestyle"]) for s in styles}) == 8
    assert len({s["marker"] for s in styles}) == 8


def test_top1_figure_says_mean_over_n_seeds_and_what_the_bars_are(four_by_three):
    from ablation.report import plots

    table = comparison(load_runs(four_by_three))
    assert plots.n_text(table) == "mean over 3 seeds"
    title = titles(lambda: plots.top1_bars(table, four_by_three / "t.png"))
    assert "mean over 3 seeds" in title and "error bars: ±1 sample sd" in title


def test_val_curves_name_their_seeds(four_by_three):
    from ablation.report import plots

    runs = load_runs(four_by_three)
    text = titles(lambda: plots.val_curves(comparison(runs), runs, four_by_three / "v.png"))
    assert "validation top-1 (%) per variant, mean over seeds 0, 1, 2" in text
