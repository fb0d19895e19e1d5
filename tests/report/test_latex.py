"""The LaTeX a paper prints: comparison.tex and comparison_full.tex compile with
pdflatex in a plain article, their tables hold the Markdown table's numbers and
bold, the statistics are notes beneath each table and the locality explanation
is in the PDF.

The report is one of every kind of block: a holdout 2^3 factorial with three seeds
and locality diagnostics, an official-protocol block with best epochs and the
paper's top-1, a tuned block, and a block under a very long setting label. Each
file is compiled in a document that loads only the packages its first line names.
"""
import json
import re
import shutil
import subprocess
from itertools import product
from pathlib import Path

import pytest

from ablation.report import write_report


from tests.helpers.records import BASE_CONFIG, record

needs_pdflatex = pytest.mark.skipif(shutil.which("pdflatex") is None,
                                    reason="needs pdflatex (texlive)")

PUBLISHED = {"source": "Lee, Lee & Song (2021), Table 2", "dataset": "cifar100",
             "top1": {"paper": {"ViT": 93.58, "SPT": 94.2, "LSA (mask + temp.)": 94.0,
                                "SL-ViT": 94.53}}}
# two settings differing in every one of these keys: a block title of several lines
LONG_SETTINGS = [
    {"augmentation_policy": "randaugment-with-cutmix-and-mixup-and-random-erasing",
     "label_smoothing": 0.1, "stochastic_depth_rate": 0.1, "warmup_epochs": 10,
     "checkpoint_directory": "/scratch/" + "x" * 40 + "/ckpt",
     "optimizer_name": "adamwwithdecoupledweightdecayandnesterovmomentum"},
    {"augmentation_policy": "autoaugment_cifar10_policy_v2_with_cutout_sixteen_pixels",
     "label_smoothing": 0.2, "stochastic_depth_rate": 0.2, "warmup_epochs": 5,
     "checkpoint_directory": "/scratch/" + "y" * 40 + "/ckpt",
     "optimizer_name": "sgd"}]


def _noise(*keys):
    """A spread between seeds that differs by variant: -0.002 .. +0.002."""
    spt, lsa, other, seed = map(int, keys)
    return ((7 * spt + 3 * lsa + 5 * other + 11 * seed + 13 * spt * seed + 2 * lsa * seed)
            % 5 - 2) * 0.001


def _diag(distance, entropy):
    return {"probe_images": 4, "layers": [],
            "summary": {"mean_distance_px": distance, "normalized_entropy": entropy}}


def _config(**trainer):
    config = json.loads(json.dumps(BASE_CONFIG))
    config["trainer"].update(trainer)
    return config


def _multi_block_sweep(root: Path) -> Path:
    # (a) holdout, all eight variants, three seeds, locality diagnostics: a 2^3 factorial
    for (spt, lsa, temp), seed in product(product((False, True), repeat=3), (0, 1, 2)):
        top1 = (0.80 + 0.02 * spt + 0.011 * lsa - 0.003 * temp + 0.004 * seed
                 + _noise(spt, lsa, temp, seed))
        top5 = 0.95 + 0.01 * spt + _noise(temp, spt, lsa, seed)
        record(root, spt, lsa, temp, seed, top1, top5,
               name=f"holdout-{int(spt)}{int(lsa)}{int(temp)}-s{seed}",
               extra={"diagnostics": _diag(
                   5.0 - 0.8 * spt + 0.3 * lsa + 0.05 * seed + 10 * _noise(spt, lsa, temp, seed),
                   0.71 - 0.02 * lsa - 0.01 * temp + 0.003 * seed + _noise(lsa, temp, spt, seed))})
    # (b) the official protocol, the paper's four variants, best epochs and paper top-1
    official = _config(protocol="official")
    official["report"] = {"published": PUBLISHED}
    for (spt, lsa), seed in product(product((False, True), repeat=2), (0, 1, 2)):
        final = 0.905 + 0.012 * spt + 0.006 * lsa + 0.003 * seed + _noise(spt, lsa, 0, seed)
        record(root, spt, lsa, lsa, seed, final, dataset="cifar100", config=official,
               name=f"official-{int(spt)}{int(lsa)}-s{seed}", extra={
                   "protocol": "official", "metrics": {
                       "test_top1": final, "test_top5": 0.99, "best_test_top1": final + 0.004,
                       "best_test_top5": 0.995, "best_test_epoch": 90}})
    # (c) tuned per variant: three trials each, two final seeds, one searched key
    for on in (False, True):
        trials = [(0.001, 0.80), (0.003, 0.84 + 0.05 * on), (0.01, 0.82)]
        entry = lambda trial, lr, on=on: {  # noqa: E731
            "study": f"study-{int(on)}", "trial": trial,
            "values": {"trainer.learning_rate": lr, "trainer.weight_decay": 0.05},
            "objective": "final_val_top1", "trials": 3,
            "params": ["trainer.learning_rate", "trainer.weight_decay"], "spread": 10.0,
            "sampler_seed": 0, "search_seed": 1000, "epochs": 2}
        for number, (lr, score) in enumerate(trials):
            record(root, on, on, on, 1000, 0.5, dataset="svhn", name=f"tuned-{int(on)}-t{number}",
                   config=_config(learning_rate=lr),
                   extra={"role": "trial", "tuning": entry(number, lr), "metrics": {
                       "test_top1": 0.99, "test_top5": 1.0, "final_val_top1": score}})
        for seed in (0, 1):
            top1 = 0.90 + 0.02 * on + 0.005 * seed + _noise(on, on, on, seed)
            record(root, on, on, on, seed, top1, dataset="svhn", name=f"tuned-{int(on)}-s{seed}",
                   config=_config(learning_rate=0.003),
                   extra={"role": "final", "tuning": entry(None, 0.003)})
    # (d) two settings of one dataset x model under a very long label each
    for variant, ((spt, lsa), seed) in enumerate(product(product((False, True), repeat=2),
                                                         (0, 1))):
        for k, setting in enumerate(LONG_SETTINGS):
            config = _config(**setting)
            record(root, spt, lsa, lsa, seed, 0.6 + 0.01 * spt + 0.005 * k + 0.002 * seed
                   + _noise(spt, lsa, k, seed),
                   dataset="tiny-imagenet", model="vit-small-patch4-heads12-depth9",
                   config=config, name=f"long-{k}-{variant}")
    write_report(root, make_plots=False)
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return _multi_block_sweep(tmp_path_factory.mktemp("latex"))


def _packages(tex: str) -> str:
    match = re.match(r"% Needs \\usepackage\{([\w,]+)\}", tex)
    assert match, tex.splitlines()[0]
    return match.group(1)


def _heads(tex: str) -> list[str]:
    """The head row of every tabular: the line after its top rule (group heads skipped)."""
    lines = tex.splitlines()
    heads = []
    for i, line in enumerate(lines):
        if line == r"\toprule":
            j = i + 1
            while r"\multicolumn" in lines[j] or r"\cmidrule" in lines[j]:
                j += 1
            heads.append(lines[j])
    return heads


def test_the_paper_table_and_the_full_one_are_plain_floats_with_notes(report):
    main = (report / "comparison.tex").read_text()
    full = (report / "comparison_full.tex").read_text()
    for tex in (main, full):
        assert not re.search(r"\\(resizebox|scalebox|adjustbox|small|scriptsize|tiny)\b", tex)
        assert tex.isascii()
        assert _packages(tex) == "booktabs,amssymb"
        assert set(re.findall(r"\\begin\{(table\*?)\}", tex)) == {"table"}
        # the caption is a short paragraph; the statistics are notes beneath the tabular
        captions = re.findall(r"\\caption\{(.*)\}", tex)
        assert len(captions) >= 11  # 5 blocks, 4 factorials, locality and its effects
        for caption in captions:
            assert not re.search(r"Protocol:|paired t-interval|1 test image|Power \(|Code:",
                                 caption), caption
        notes = re.findall(r"\\begin\{minipage\}\{\\linewidth\}\\footnotesize\n(.*)\n", tex)
        assert sum("paired t-interval" in n and ("Holm" in n or "could be tested" in n)
                   and "1 test image" in n and "Code:" in n for n in notes) == 5  # every block's
        assert sum("Effects: each switch's main effect" in n for n in notes) == 4
        # the locality explanation is text in the PDF, never a comment
        said = [li for li in tex.splitlines() if "Locality, on the same probe test" in li]
        assert said and not any(li.lstrip().startswith("%") for li in said)
        # the published top-1 of the paper's ViT, beside the block's own
        assert re.search(r"^ViT & .* & 93\.58 & ", tex, flags=re.MULTILINE)
    # the paper's table: top-1 only, no speed; every column in the full one
    main_heads, full_heads = " ".join(_heads(main)), " ".join(_heads(full))
    assert "Top-1" in main_heads and "Params" in main_heads and r"\checkmark" not in main_heads
    for column in ("Top-5", "img/s", "Train", "Trials", "Best val"):
        assert column not in main_heads and column in full_heads, column
    assert "Tuned" in main_heads  # a tuned block says what it chose
    # the official protocol's three top-1 columns under one head
    assert r"\multicolumn{3}{c}{Top-1 (\%)}" in main
    assert "best epoch & paper" in main_heads and "Paper top-1" in full_heads
    assert (report / "comparison_full.tex").name in json.loads(
        (report / "report.json").read_text())["files"]


def _numbers(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"[-+]?\d+\.\d+", cell)]


def test_the_full_tables_hold_the_markdown_tables_numbers_and_bold(report):
    """Every table of comparison_full.tex is the Markdown's, in the same order: cell by
    cell the same numbers, bold where the Markdown's is."""
    md = (report / "comparison.md").read_text()
    md_tables = [[re.split(r"(?<!\\)\|", row.strip())[1:-1] for row in table.splitlines()[2:]]
                 for table in re.findall(r"(?:^\|.*\n)+", md, flags=re.MULTILINE)]
    tex = (report / "comparison_full.tex").read_text()
    tex_tables = [[re.split(r"(?<!\\)&", row.removesuffix(r" \\")) for row in body.splitlines()]
                  for body in re.findall(r"\\midrule\n(.*?)\n\\bottomrule", tex, flags=re.S)]
    assert len(tex_tables) == len(md_tables) == 11
    bold = 0
    for md_rows, tex_rows in zip(md_tables, tex_tables):
        assert len(md_rows) == len(tex_rows)
        for md_row, tex_row in zip(md_rows, tex_rows):
            assert len(md_row) == len(tex_row), (md_row, tex_row)
            for md_cell, tex_cell in zip(md_row, tex_row):
                assert _numbers(md_cell) == _numbers(tex_cell), (md_cell, tex_cell)
                assert ("**" in md_cell) == (r"\textbf" in tex_cell), (md_cell, tex_cell)
                bold += "**" in md_cell
    assert bold >= 5


@pytest.mark.slow  # pdflatex and pdftotext: about 3 s each
@needs_pdflatex
@pytest.mark.parametrize("tex_file", ["comparison.tex", "comparison_full.tex"])
def test_the_tables_compile_with_pdflatex(report, tmp_path, tex_file):
    shutil.copy(report / tex_file, tmp_path / tex_file)
    (tmp_path / "paper.tex").write_text(
        f"\\documentclass{{article}}\n"
        f"\\usepackage{{{_packages((report / tex_file).read_text())}}}\n"
        f"\\begin{{document}}\nSome text of the paper before the tables.\n\n"
        f"\\input{{{tex_file}}}\n\\clearpage\n\\end{{document}}\n")
    result = subprocess.run(["pdflatex", "-halt-on-error", "-interaction=nonstopmode",
                             "-no-shell-escape", "paper.tex"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (tmp_path / "paper.log").read_text(errors="replace")[-3000:]
    if shutil.which("pdftotext") is None:
        pytest.skip("needs pdftotext (poppler-utils)")
    text = " ".join(subprocess.run(["pdftotext", "-layout", str(tmp_path / "paper.pdf"), "-"],
                                   capture_output=True, text=True, timeout=60,
                                   check=True).stdout.split())
    # every block reached the PDF, with its notes and the locality explanation
    for title in ("cifar10 × paper, holdout protocol", "cifar100 × paper, official protocol",
                  "svhn × paper, holdout protocol (tuned per variant",
                  "tiny-imagenet × vit-small-patch4-heads12-depth9"):
        assert title in text, title
    assert "correction across the block" in text and "1 test image = 0.01 pp" in text
    assert "Mind that the LSA mask moves the weight a token gave itself" in text
