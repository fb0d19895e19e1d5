"""Escaping (ablation/report/escape.py): outputs that cannot be turned against their
reader. A report of records whose names hold formulas, TeX commands and HTML, read
back as a spreadsheet, pdflatex and a Markdown renderer would read it.

What a record's author controls and the tables show: the dataset and model
names, config values (the block's setting label), the code description
(``environment``) and a config's protocol. Run and sweep names never reach the
tables (they are not settings)."""
import csv
import json
import re
import shutil
import subprocess
from itertools import product
from pathlib import Path

import pytest

from ablation.report import write_report
from ablation.report.escape import LATEX_UNICODE, csv_cell, latex_text, markdown_text
from tests.helpers.records import BASE_CONFIG, record

TEX_HOSTILE = r"\input{/etc/passwd}\write18{touch /tmp/pwned}$x^2_y$ & #1 ~ 100%"
HTML_HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(1)>"
FORMULAS = ['=HYPERLINK("http://x","y")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)",
            "\t=1+1", "\r=1+1"]
DIAG = {"probe_images": 4, "layers": []}


def _diag(distance):
    return {**DIAG, "summary": {"mean_distance_px": distance, "normalized_entropy": 0.5}}


def _hostile_sweep(root: Path) -> Path:
    """Two blocks, every kind of table: (a) all eight variants on the holdout
    protocol, two seeds, locality diagnostics and factorial effects, dataset a
    formula, model TeX; (b) the official protocol (its widest table: the best-epoch
    columns) under two settings whose labels hold HTML, a pipe, a newline and
    non-ASCII text. Some variants do worse than the ViT: negative gaps."""
    env = {"code": {"version": "0.1.0<b>", "commit": "@" + "a" * 39}, "backend": "jax",
           "backend_version": "0.4 α|β"}
    for i, ((spt, lsa, temp), seed) in enumerate(product(product((False, True), repeat=3),
                                                         (0, 1))):
        top1 = 0.50 + 0.03 * spt - 0.02 * lsa + 0.01 * temp + 0.005 * seed
        record(root, spt, lsa, temp, seed, top1, dataset=FORMULAS[0], model=TEX_HOSTILE,
               name=f"a{i}", extra={"diagnostics": _diag(5.0 - spt + 0.3 * lsa + 0.1 * seed),
                                    "environment": env})
    for note in (f"-1+1|x {HTML_HOSTILE}", "@cmd\n# injected α Δ ± × ≥ ≤ – — · ° µ é ﬁ 中"):
        config = json.loads(json.dumps(BASE_CONFIG))
        config["trainer"]["protocol"] = "official"
        config["dataset"]["note"] = note
        for i, ((spt, lsa, temp), seed) in enumerate(product(product((False, True), repeat=3),
                                                             (0, 1))):
            top1 = 0.60 - 0.01 * spt + 0.02 * lsa + 0.003 * seed
            record(root, spt, lsa, temp, seed, top1, dataset=f"α-Δ {HTML_HOSTILE}",
                   model="vit|tiny", config=config, name=f"b{len(note)}-{i}",
                   extra={"protocol": "official", "environment": env, "metrics": {
                       "test_top1": top1, "test_top5": 0.9,
                       "best_test_top1": top1 + 0.01, "best_test_top5": 0.91}})
    write_report(root, make_plots=False)
    return root


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return _hostile_sweep(tmp_path_factory.mktemp("hostile"))


# --- CSV --------------------------------------------------------------------------

def _csv_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def test_csv_text_that_a_spreadsheet_would_run_is_quoted_and_numbers_stay_numbers(tmp_path):
    # one block per formula-like dataset name, with every CSV the report writes
    for d, dataset in enumerate(FORMULAS):
        for seed, (spt, lsa) in product((0, 1), product((False, True), repeat=2)):
            record(tmp_path, spt, lsa, lsa, seed, 0.5 - 0.02 * spt + 0.01 * lsa + 0.003 * seed,
                   dataset=dataset, name=f"d{d}-{int(spt)}{int(lsa)}-s{seed}",
                   extra={"diagnostics": _diag(4.0 - spt + 0.2 * seed)})
    write_report(tmp_path, make_plots=False)
    names = ("comparison.csv", "factorial_effects.csv", "locality.csv", "locality_effects.csv")
    negative = 0
    for name in names:
        rows = _csv_rows(tmp_path / name)
        # the carriage return: a line feed, which the writer quotes (a lone one ends a row)
        expected = {"'" + d.replace("\r", "\n") for d in FORMULAS}
        assert {r["dataset"] for r in rows} == expected, name
        for row in rows:
            for column, cell in row.items():
                # a cell a spreadsheet reads as a formula is a number, nothing else
                assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")) or _number(cell), \
                    (name, column, cell)
                negative += cell.startswith("-") and _number(cell)
    assert negative  # the worse variants' gaps and effects: negative numbers, unquoted
    rows = {r["variant"]: r for r in _csv_rows(tmp_path / "comparison.csv")}
    assert float(rows["SPT"]["d_top1"]) == pytest.approx(-2.0)


def test_csv_cell_rule():
    cells = ("=1", "+1", "-1", "@a", "\tx", "\rx", "a=1", "", "'=", "a\rb")
    assert [csv_cell(v) for v in cells] == \
        ["'=1", "'+1", "'-1", "'@a", "'\tx", "'\nx", "a=1", "", "'=", "a\nb"]
    assert csv_cell(-1.5) == -1.5 and csv_cell(None) is None and csv_cell(3) == 3


# --- LaTeX ------------------------------------------------------------------------

# names that would run TeX, read a file, end a table or comment the rest of a line out
INJECTIONS = [TEX_HOSTILE, "a\\", "\\catcode`\\@=0 @input{x}", "^^5cinput{x}", "}\\end{table}{",
              "\\\\[-9cm]", "x\n\ny % z", "\\csname input\\endcsname", "＼input｛x｝﹪"]
# every control sequence latex_text writes for ASCII text
ESCAPES = {"textbackslash", "{", "}", "$", "&", "#", "%", "_", "textasciicircum",
           "textasciitilde", "textless", "textgreater", "textbar", "texttt"}


def test_latex_names_are_text_and_the_file_is_ascii(hostile):
    tex = (hostile / "comparison.tex").read_text()
    assert tex.isascii(), sorted({c for c in tex if not c.isascii()})
    assert r"\input{" not in tex and r"\write18{" not in tex
    assert r"\textbackslash{}input\{/etc/passwd\}\textbackslash{}write18\{touch" in tex
    assert r"$\$$x\textasciicircum{}2\_y$\$$ \& \#1 \textasciitilde{} 100\%" in tex
    assert r"$\alpha$-$\Delta$ \textless{}script\textgreater{}" in tex
    # the packages it needs, named at its top; the full table's file likewise
    assert tex.startswith("% Needs \\usepackage{booktabs,amssymb}")
    full = (hostile / "comparison_full.tex").read_text()
    assert full.isascii() and full.startswith("% Needs \\usepackage{booktabs,amssymb}")
    assert r"\input{" not in full and r"\write18{" not in full


@pytest.mark.parametrize("text", INJECTIONS)
def test_a_name_in_latex_runs_no_command(text):
    out = latex_text(text)
    assert set(re.findall(r"\\([A-Za-z]+|.)", out)) <= ESCAPES, out
    bare = re.sub(r"\\[{}$%]", "", out)
    assert "%" not in bare and "^^" not in out and "\n" not in out and bare.count("$") % 2 == 0
    depth = 0  # braces balanced: no name closes a group it did not open
    for brace in re.sub(r"[^{}]", "", bare):
        depth += 1 if brace == "{" else -1
        assert depth >= 0, out
    assert depth == 0, out


@pytest.mark.parametrize("text, latex", [
    ("\\ { } $ & # ^ _ ~ %", r"\textbackslash{} \{ \} $\$$ \& \# \textasciicircum{} \_ "
                             r"\textasciitilde{} \%"),
    ("< > |", r"\textless{} \textgreater{} \textbar{}"),
    ('"[x]', r'\texttt{"}{[}x{]}'), ("a--b", "a-{}-b"), ("a\nb", "a b"),
    ("Δ ± × − → — ✓", r"$\Delta$ $\pm$ $\times$ $-$ $\rightarrow$ \textemdash{} \checkmark{}"),
    ("é ﬁ ²", "e fi 2"), ("中", "?"), ("¼", "1?4"),  # letters without accents, or ?
])
def test_latex_text(text, latex):
    assert latex_text(text) == latex


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="needs pdflatex (texlive)")
def test_the_latex_tables_compile_in_a_plain_article(hostile, tmp_path):
    tex = (hostile / "comparison.tex").read_text()
    packages = re.match(r"% Needs \\usepackage\{([\w,]+)\}", tex).group(1)
    shutil.copy(hostile / "comparison.tex", tmp_path / "comparison.tex")
    # and every character the escape knows, some it does not, and the injections
    every = latex_text(" ".join([*LATEX_UNICODE, "é ï ç ß ą ő 中", *INJECTIONS]))
    (tmp_path / "paper.tex").write_text(
        "\\documentclass{article}\n"
        f"\\usepackage{{{packages}}}\n"
        "\\begin{document}\n\\input{comparison.tex}\n"
        f"\\clearpage\n{every}\n\\end{{document}}\n")
    result = subprocess.run(["pdflatex", "-halt-on-error", "-interaction=nonstopmode",
                             "-no-shell-escape", "paper.tex"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    log = (tmp_path / "paper.log").read_text(errors="replace")
    assert result.returncode == 0, log[-3000:]
    assert "(/etc/passwd" not in log and "runsystem" not in log  # never read, never run
    # no glyph of a font TeX would have to make as a bitmap (text companion, TS1)
    assert not re.search(r"tc(rm|tt|ss)\d|\d+pk>", log), re.findall(r"\S*pk>", log)
    assert (tmp_path / "paper.pdf").stat().st_size > 0
    # every table was in the document: two blocks of the official protocol and the
    # holdout block, each with its factorial effects, and the holdout block's locality
    # table and its effects
    assert tex.count(r"\caption{") == 8


# --- Markdown ---------------------------------------------------------------------

def test_markdown_shows_html_and_pipes_as_text(hostile):
    md = (hostile / "comparison.md").read_text()
    assert "<script" not in md and "<img" not in md and "<b>" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in md
    assert not any(line.startswith("# injected") for line in md.splitlines())
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert any("vit\\|tiny" in h for h in headings) and all("vit|tiny" not in h for h in headings)
    assert any("0.1.0&lt;b&gt;" in line for line in md.splitlines())  # the code, in the caption
    # every table row has its header's cells: no name adds one
    for table in re.findall(r"(?:^\|.*\n)+", md, flags=re.MULTILINE):
        lines = table.splitlines()
        cells = {len(re.split(r"(?<!\\)\|", line)) for line in lines}
        assert len(cells) == 1, lines


def test_markdown_text():
    assert markdown_text("<a href='x'>&</a>|\\`[l](j)$x$\n") == \
        "&lt;a href='x'&gt;&amp;&lt;/a&gt;\\|\\\\\\`\\[l\\](j)\\$x\\$ "


def test_html_keeps_names_as_text(hostile):
    page = (hostile / "comparison.html").read_text()
    assert "<script" not in page and "<img src=x" not in page
