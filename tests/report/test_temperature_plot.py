"""The learned temperature's figure (ablation/report/temperature_plot.py): a change from
the start, on one honest axis."""
import json

import pytest

from ablation.report import comparison, load_runs
from tests.helpers.figures import titles
from tests.helpers.records import BASE_CONFIG, record


def test_temperature_is_a_change_from_the_start_on_one_honest_axis(tmp_path):
    """Two variants drift by 0.3 % and 12 %: both panels share one symmetric axis wide
    enough for the larger, the start line is drawn and the seeds are named."""
    from ablation.report import temperature_plot

    cfg = json.loads(json.dumps(BASE_CONFIG))
    cfg["model"].update(key_dim=16)           # T0 = sqrt(16) = 4
    for seed in (0, 1):
        for spt, drift in ((False, 0.003), (True, 0.12)):
            history = [{"epoch": e, "val/top1": 0.5, "temperature/block_0": 4 * (1 + drift * e / 3)}
                       for e in (1, 2, 3)]
            record(tmp_path, spt, True, True, seed, 0.5, config=cfg, extra={"history": history})
    runs = load_runs(tmp_path)
    table = comparison(runs)
    changes = temperature_plot.changes(runs)
    small, seeds, from_t0 = changes["LSA (mask + temp.)"]
    assert from_t0 and seeds == [0, 1]
    assert small.loc[0, 0] == 0.0 and small.loc[3, 0] == pytest.approx(0.3, abs=1e-6)
    text = titles(lambda: temperature_plot.temperature_figure(table, runs, tmp_path / "t.png"))
    limits = json.loads(text.splitlines()[-1])
    assert len(limits) == 2 and limits[0] == limits[1]          # one shared axis
    assert limits[0][1] == pytest.approx(12 * temperature_plot.MARGIN)
    assert limits[0][0] == -limits[0][1]                        # symmetric around the start
    assert "mean over seeds 0, 1" in text and "change from start (%)" in text
    # a lone tiny drift still gets the floor, not a panel autoscaled to 0.3 %
    assert temperature_plot.limit([small]) == temperature_plot.FLOOR_PCT
