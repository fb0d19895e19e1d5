"""The report's Markdown and HTML (ablation/report/render.py): bold only where an
interval excludes zero, footnotes only where true, every figure embedded with a
caption, the best epoch beside the final one, and tables that parse back to the
numbers they were made from."""
import base64
import csv
import json
import re

import pytest

from ablation.report import write_report
from tests.helpers.records import BASE_CONFIG, record


def test_bold_marks_only_gaps_whose_interval_excludes_zero(four_by_three):
    md = write_report(four_by_three, make_plots=False).markdown
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
            for line in md.splitlines() if line.startswith("| ") and line.count("|") == 13}
    assert rows["SL-ViT"][7].startswith("**+7.00 [+4.52, +9.48]**")   # excludes zero
    assert "**" not in rows["SPT"][7]                                 # [-1.13, +6.46]
    for variant, cells in rows.items():  # never by rank: not accuracy, speed or time
        assert not any("**" in cells[i] for i in (5, 6, 9, 10, 11)), variant
    assert "95 % paired t-interval, n-1 df" in md
    assert "1 test image = 0.01 pp (10,000 test images)" in md
    assert "no spread" not in md


def numbers(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"[-+]?\d+\.\d+", cell)]


def test_outputs_parse_back_to_the_same_numbers(four_by_three):
    report = write_report(four_by_three, make_plots=False)
    table = report.table.set_index("variant")
    md_rows = [line for line in (four_by_three / "comparison.md").read_text().splitlines()
               if line.startswith("| ") and not line.startswith("| Variant")
               and not line.startswith("| Term") and line.count("|") == 13]
    tex_rows = [line for line in (four_by_three / "comparison.tex").read_text().splitlines()
                if line.endswith(r"\\") and r"\checkmark" in line or line.startswith("ViT &")]
    assert len(md_rows) == len(tex_rows) == 4
    for md, tex in zip(md_rows, tex_rows):
        md_cells = [c.strip() for c in md.strip("|").split("|")]
        tex_cells = [c.strip() for c in tex.rstrip("\\").split("&")]
        r = table.loc[md_cells[0]]
        assert tex_cells[0] == md_cells[0]
        # Markdown: every column; comparison.tex, the paper's: Variant, SPT, LSA, n,
        # Top-1, ΔTop-1, Params (the temperature follows the mask: no column of its own)
        for top1, gap1 in ((md_cells[5], md_cells[7]), (tex_cells[4], tex_cells[5])):
            assert numbers(top1) == pytest.approx(
                [round(r["top1_mean"], 2), round(r["top1_std"], 2)])
            if md_cells[0] != "ViT":
                assert numbers(gap1) == pytest.approx(
                    [round(r[k], 2) for k in ("d_top1", "d_top1_low", "d_top1_high")])
        assert numbers(md_cells[6]) == pytest.approx(
            [round(r["top5_mean"], 2), round(r["top5_std"], 2)])
    assert "**" in next(m for m in md_rows if m.startswith("| SL-ViT |")).split("|")[8]
    assert r"\textbf{" in next(t for t in tex_rows if t.startswith("SL-ViT"))
    with open(four_by_three / "comparison.csv") as f:
        csv_rows = list(csv.DictReader(f))
    for r in csv_rows:  # 10,000 test images x 3 seeds: 4 decimals (one image = 0.0033 pp)
        assert float(r["top1_mean"]) == pytest.approx(table.loc[r["variant"], "top1_mean"],
                                                      abs=5e-5)
        if r["d_top1_low"]:
            assert float(r["d_top1_low"]) == pytest.approx(table.loc[r["variant"], "d_top1_low"],
                                                           abs=5e-5)
    assert "<table>" in (four_by_three / "comparison.html").read_text()


def test_no_one_seed_footnote_where_intervals_are_shown(four_by_three):
    md = write_report(four_by_three, make_plots=False).markdown
    assert "Factorial effects (3 seed(s))" in md
    assert "No interval with one seed" not in md


def test_html_embeds_every_figure_with_a_caption(four_by_three):
    report = write_report(four_by_three)
    page = (four_by_three / "comparison.html").read_text()
    images = [p for p in report.files if p.suffix == ".png"]
    embedded = re.findall(r"src='data:image/png;base64,([^']+)'", page)
    assert len(embedded) == len(images) >= 3
    assert {base64.b64decode(e) for e in embedded} == {p.read_bytes() for p in images}
    assert page.count("<figcaption>") == len(images)
    assert "±1 sample standard deviation" in page


def test_factorial_note_says_the_seed_is_the_unit(four_by_three):
    md = write_report(four_by_three, make_plots=False).markdown
    assert "t-interval over the seeds (n − 1 df" in md and "the seed is the unit" in md
    assert "residuals" not in md and "sharper" not in md


def test_official_protocol_shows_the_best_epoch_beside_the_final_one(tmp_path):
    official = json.loads(json.dumps(BASE_CONFIG))
    official["trainer"]["protocol"] = "official"
    for seed, (final, best) in enumerate(((0.70, 0.72), (0.71, 0.74))):
        for spt in (False, True):
            record(tmp_path, spt, False, False, seed, final + 0.01 * spt, config=official,
                   extra={"protocol": "official", "metrics": {
                       "test_top1": final + 0.01 * spt, "test_top5": 0.9,
                       "best_test_top1": best + 0.01 * spt, "best_test_top5": 0.95,
                       "best_test_epoch": 2}})
    report = write_report(tmp_path, make_plots=False)
    header = next(li for li in report.markdown.splitlines() if li.startswith("| Variant"))
    assert "Best-epoch top-1 (%, paper's measure)" in header
    vit = next(li for li in report.markdown.splitlines() if li.startswith("| ViT |"))
    cells = [c.strip() for c in vit.strip("|").split("|")]
    assert cells[5] == "70.50 ± 0.71" and cells[7] == "73.00 ± 1.41"
    assert "the measure the paper and its official code report" in report.markdown
    with open(tmp_path / "comparison.csv") as f:
        rows = {r["variant"]: r for r in csv.DictReader(f)}
    assert float(rows["SPT"]["best_top1_mean"]) == pytest.approx(74.0)
    assert float(rows["ViT"]["best_top5_mean"]) == pytest.approx(95.0)
    tex = (tmp_path / "comparison.tex").read_text()
    assert "Best-epoch top-1" in tex and "73.00" in tex
