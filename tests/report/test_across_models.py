"""Several models in one report (the across-models tables of ablation/report/render.py,
and the blocks' names): each block against its own plain model, named for it, and the
models side by side."""
import pytest

from tests.helpers.records import BASE_CONFIG, TOP1, record

PUBLISHED = {"source": "Lee, Lee & Song (2021)", "dataset": "cifar10",
             "top1": {"paper": {"ViT": 73.81, "SL-ViT": 76.92},
                      "cait": {"ViT": 76.89, "SL-ViT": 80.32}}}
LIFT = {"paper": 0.0, "cait": 0.05}  # CaiT's runs: 5 points above the ViT's


@pytest.fixture
def two_models(tmp_path):
    for model, architecture in (("cait", "cait"), ("paper", "vit")):
        config = {**BASE_CONFIG, "model": {"name": model, "architecture": architecture},
                  "trainer": {**BASE_CONFIG["trainer"], "protocol": "official"},
                  "report": {"published": PUBLISHED}}
        for (spt, lsa), top1 in TOP1.items():
            for seed in (0, 1, 2):
                value = top1[seed] + LIFT[model] + 0.004 * seed * spt * (model == "cait")
                record(tmp_path, spt, lsa, lsa, seed, value, model=model, config=config,
                       extra={"metrics": {"test_top1": value, "test_top5": 0.9,
                                          "best_test_top1": value + 0.01,
                                          "best_test_top5": 0.91}})
    return tmp_path


def test_each_block_names_its_own_plain_model(two_models):
    from ablation.report import write_report

    report = write_report(two_models, make_plots=False)
    page = report.markdown
    # the paper's order of architectures (ViT before CaiT), not the presets' names'
    vit = page[page.index("## cifar10 × paper"):page.index("## cifar10 × cait")]
    cait = page[page.index("## cifar10 × cait"):page.index("## Across models")]
    assert "| ΔTop-1 vs CaiT |" in cait and "| SL-CaiT |" in cait and "| CaiT |" in cait
    assert "against the plain CaiT" in cait and "ViT" not in cait
    assert "| ΔTop-1 vs ViT |" in vit and "| SL-ViT |" in vit and "CaiT" not in vit
    assert page.startswith("# Ablation: top-1 / top-5 against each model's plain variant")
    table = report.table.set_index(["model", "variant"])  # the data keep the variant's key
    assert table.loc[("cait", "SL-ViT"), "paper_top1"] == 80.32
    assert table.loc[("paper", "SL-ViT"), "paper_top1"] == 76.92
    latex = (two_models / "comparison.tex").read_text()
    assert "SL-CaiT" in latex and "SL-ViT" in latex
    assert r"$\Delta$Top-1 vs CaiT" in (two_models / "comparison_full.tex").read_text()


def test_the_locality_section_names_each_blocks_plain_model(two_models):
    from ablation.report import write_report

    diagnostics = {"probe_images": 4, "summary": {"mean_distance_px": 3.0,
                                                  "normalized_entropy": 0.5},
                   "layers": [{"layer": 0, "mean_distance_px": [3.0],
                               "normalized_entropy": [0.5]}]}
    for path in two_models.glob("*/run.json"):
        import json
        record = json.loads(path.read_text())
        record["diagnostics"] = diagnostics
        path.write_text(json.dumps(record))
    page = write_report(two_models, make_plots=False).markdown
    cait = page[page.index("## Locality: cifar10 × cait"):]
    assert page.index("## Locality: cifar10 × paper") < page.index("## Locality: cifar10 × cait")
    assert "| ΔMean distance (px) vs CaiT |" in cait and "| SL-CaiT |" in cait
    assert "ViT" not in cait
    latex = (two_models / "comparison.tex").read_text()
    assert "gaps to the plain CaiT paired by seed" in latex


def test_the_models_side_by_side(two_models):
    from ablation.report import write_report

    report = write_report(two_models, make_plots=False)
    page = report.markdown
    summary = page[page.index("## Across models: cifar10, official protocol"):]
    lines = [line for line in summary.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| Model | n (plain, SL) | Top-1 plain (%) | Top-1 SL (%) | "
                               "ΔTop-1 SL (pp) | SPT effect (pp) |")
    vit_line, cait_line = lines[1], lines[2]  # the paper's order: ViT first
    assert vit_line.startswith("| ViT (paper) | 3, 3 |") and cait_line.startswith("| CaiT (cait)")
    table = report.table.set_index(["model", "variant"])
    for model, line in (("paper", vit_line), ("cait", cait_line)):
        sl = table.loc[(model, "SL-ViT")]
        assert f"+{sl['d_top1']:.2f} [+{sl['d_top1_low']:.2f}, +{sl['d_top1_high']:.2f}]" in line
        spt = report.effects[(report.effects["model"] == model)
                             & (report.effects["term"] == "SPT")].iloc[0]
        assert f"{spt['top1_effect']:+.2f} [" in line
    assert "| 76.89 → 80.32 |" in cait_line and "| 73.81 → 76.92 |" in vit_line
    assert "Nothing is bold here" in summary and "**" not in summary


def test_one_model_has_no_summary(two_models):
    from ablation.report import write_report

    for folder in two_models.glob("*-cait"):
        (folder / "run.json").unlink()
    page = write_report(two_models, make_plots=False).markdown
    assert "Across models" not in page
    assert page.startswith("# Ablation: top-1 / top-5 against the plain ViT")


def test_the_figures_name_each_blocks_own_models(two_models, monkeypatch):
    """The top-1 panel's categories and the curves' legend say SL-CaiT in CaiT's panel."""
    import matplotlib.figure

    from ablation.report import write_report

    shown = []
    save = matplotlib.figure.Figure.savefig

    def record_then_save(fig, *args, **kwargs):
        for ax in fig.axes:
            legend = ax.get_legend()
            shown.append((ax.get_title().split("\n")[0],
                          [t.get_text() for t in ax.get_xticklabels()]
                          + ([t.get_text() for t in legend.get_texts()] if legend else [])))
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record_then_save)
    write_report(two_models, make_plots=True)
    cait = [names for title, names in shown if "× cait" in title and "SL-CaiT" in names]
    vit = [names for title, names in shown if "× paper" in title and "SL-ViT" in names]
    assert len(cait) >= 2 and len(vit) >= 2  # the top-1 panel and the validation curves
    assert not any("SL-ViT" in names for title, names in shown if "× cait" in title)
