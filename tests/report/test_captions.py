"""What the tables' captions and notes say (ablation/report/captions.py): a speed
timed over too few steps is left out, and the note says so."""
import json

from ablation.report import write_report
from tests.helpers.records import BASE_CONFIG, record


def test_speed_is_hidden_when_too_few_steps_were_timed(tmp_path):
    from ablation.report.captions import MIN_TIMED_STEPS

    cfg = json.loads(json.dumps(BASE_CONFIG))
    cfg["trainer"].update(batch_size=64, epochs=3)
    for spt, train in ((False, 1293), (True, 100_000)):   # 2 x 21 steps; 2 x 1563 steps
        record(tmp_path, spt, False, False, 0, 0.5, config=cfg,
               extra={"data": {"test": 360, "train": train}, "epochs_completed": 3,
                      "train_images_per_s": 4386.2})
    report = write_report(tmp_path, make_plots=False)
    table = report.table.set_index("variant")
    assert table.loc["ViT", "timed_steps"] == 42 < MIN_TIMED_STEPS
    assert table.loc["SPT", "timed_steps"] == 2 * 1563
    vit_line = next(li for li in report.markdown.splitlines() if li.startswith("| ViT |"))
    spt_line = next(li for li in report.markdown.splitlines() if li.startswith("| SPT |"))
    assert "4,386" not in vit_line and "—†" in vit_line and "4,386" in spt_line
    assert "† Train img/s left out: timed over only 42 training steps" in report.markdown


def test_a_models_name_from_a_record_is_text_in_every_heading():
    """An architecture no preset names is shown as written: backslashes are no
    backreferences and ``ViT`` inside it is not replaced again."""
    from ablation.report.captions import own_name

    assert own_name("SL-ViT", "cait") == "SL-CaiT"
    assert own_name("ΔTop-1 vs ViT", r"we\1ird$_{x}\input") == r"ΔTop-1 vs we\1ird$_{x}\input"
    assert own_name("SL-ViT", "ViTa") == "SL-ViTa" and own_name("SL-ViT", 7) == "SL-7"
