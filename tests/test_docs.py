"""The docs are checked against the code they describe, so they cannot drift."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from ablation.runs.record_schema import Metrics, Record

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def table_fields(markdown: str, heading: str) -> list[str]:
    """The backticked names in the first column of the table under ``heading``."""
    section = markdown.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE)


def schema_fields(model) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def test_the_record_page_lists_exactly_the_schemas_fields():
    text = (DOCS / "record.md").read_text()
    assert table_fields(text, "## Fields") == schema_fields(Record)
    assert table_fields(text, "## metrics") == schema_fields(Metrics)


def test_the_readme_is_short_and_links_every_user_page_and_the_maintainers_index():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)", readme))
    assert linked == {f"docs/{p.name}" for p in DOCS.glob("*.md")} | {
        "docs/development/README.md"}


def test_the_user_facing_docs_stay_under_100_kb():
    """README.md and docs/*.md (not docs/development/): what a researcher reads."""
    pages = [ROOT / "README.md", *DOCS.glob("*.md")]
    assert sum(len(p.read_bytes()) for p in pages) < 100_000


def test_relative_links_in_the_docs_resolve():
    broken = []
    for page in [ROOT / "README.md", ROOT / "results" / "README.md", *DOCS.rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_the_configuration_page_lists_exactly_what_is_not_a_setting():
    from ablation.config.settings import NOT_A_SETTING, NOT_A_SETTING_PREFIXES, PRESET_GROUP

    page = (ROOT / "docs" / "configuration.md").read_text()
    start = page.index("Keys that do not change what is trained")
    paragraph = page[start:page.index("\n\n", start)]
    named = set(re.findall(r"`([a-z_.]+?)(?:\.\*)?`", paragraph))
    assert named - {"NOT_A_SETTING"} == {
        *NOT_A_SETTING, *(p.rstrip(".") for p in NOT_A_SETTING_PREFIXES), PRESET_GROUP}


PACKAGES = [ROOT / "ablation", ROOT / "hydra_plugins" / "vit_ablation"]


def modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in package.rglob("*.py"))


def test_every_module_opens_with_a_one_line_summary():
    """The docs describe subpackages and point at the modules' own first lines
    (docs/development/README.md), so every module must have one."""
    missing = []
    for path in modules():
        doc = ast.get_docstring(ast.parse(path.read_text()))
        first = doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""
        if not first:
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, missing


def defined_names(path: Path) -> set[str]:
    """The names a module defines or imports at its top level."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def dotted_name_exists(name: str) -> bool:
    """``ablation.x.y`` is a module or package, or a name defined in one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").exists() else (
            base / "__init__.py" if (base / "__init__.py").exists() else None)
        if module is not None:
            rest = parts[cut:]
            return not rest or (len(rest) == 1 and rest[0] in defined_names(module))
    return False


def test_every_module_the_docs_name_exists():
    pages = [ROOT / "README.md", ROOT / "results" / "README.md", *DOCS.rglob("*.md")]
    pages = [p for p in pages if p.name != "performance-log.md"]  # a dated record
    wrong = []
    for page in pages:
        text = page.read_text()
        for path in re.findall(r"\b((?:ablation|hydra_plugins|benchmarks)/[\w/]+\.py)\b", text):
            if not (ROOT / path).exists():
                wrong.append(f"{page.relative_to(ROOT)}: {path}")
        for name in re.findall(r"\b((?:ablation|hydra_plugins|benchmarks)(?:\.\w+)+)", text):
            if not name.endswith(".py") and not dotted_name_exists(name):
                wrong.append(f"{page.relative_to(ROOT)}: {name}")
    assert not wrong, wrong
