"""The Locality section (ablation/report/locality_table.py) of runs with and without
diagnostics in one block."""
import pytest


@pytest.mark.slow
def test_runs_with_and_without_diagnostics_report_together(tmp_path):
    """An older run (no diagnostics) and a new one share a block; the Locality
    section covers the one that has them and the report still writes."""
    from ablation.runs.record import read_record
    from ablation.report import write_report
    from ablation.job import run_job
    from tests.helpers.commands import smoke_overrides
    from tests.helpers.config import compose

    common = smoke_overrides(tmp_path, "trainer.epochs=1", "dataset.limit_train=200",
                             "wandb.mode=disabled", "lsa=false")
    old = tmp_path / "smoke" / "vit-s0"
    run_job(compose(*common, "spt=false", "diagnostics.enabled=false"), old)
    new = tmp_path / "smoke" / "spt-s0"
    run_job(compose(*common, "spt=true", "diagnostics.every_epoch=false"), new)
    assert read_record(old / "run.json")["diagnostics"] is None
    record = read_record(new / "run.json")
    assert record["diagnostics"]["probe_images"] == 360  # digits' whole test split
    assert not any(k.startswith("locality/") for k in record["history"][0])

    report = write_report(tmp_path / "smoke", make_plots=True)
    assert report.table["setting"].eq("").all()  # one block: diagnostics is no setting
    assert "# Locality" in report.markdown
    assert "| SPT | 1 |" in report.markdown and "| ViT | 0 | — |" in report.markdown
    names = {p.name for p in report.files}
    assert {"locality_distance.png", "locality_entropy.png", "attention_maps.png",
            "locality.csv"} <= names


def test_a_block_whose_probe_left_layers_out_says_which_in_one_line(tmp_path):
    """A CaiT's class-attention layers, counted in its records: one line under its
    table; a ViT's records (no ``left_out``) get none, and no column changes."""
    from ablation.report import load_runs
    from ablation.report.locality_table import elements, locality_table
    from ablation.report.render import MARKDOWN
    from tests.helpers.records import BASE_CONFIG, record

    layers = [{"layer": 0, "mean_distance_px": [3.0], "normalized_entropy": [0.5]}]
    for model, left_out in (("cait_tiny", {"class_attention": 2}), ("tiny", None)):
        diagnostics = {"probe_images": 4, "layers": layers, "summary": {
            "mean_distance_px": 3.0, "normalized_entropy": 0.5},
            **({"left_out": left_out} if left_out else {})}
        config = {**BASE_CONFIG, "model": {"name": model, "architecture": model.split("_")[0]}}
        for spt in (False, True):
            record(tmp_path, spt, False, False, 0, 0.5, model=model, config=config,
                   extra={"diagnostics": diagnostics})
    table = locality_table(load_runs(tmp_path))
    lines = [e[1] for e in elements(table, table.iloc[:0], MARKDOWN) if e[0] == "p"]
    assert lines == ["CaiT's 2 class-attention layers attend from the class token only: "
                     "no locality measured."]
    assert "left_out" not in table.columns
