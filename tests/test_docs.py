"""The docs are checked against the code they describe, so they cannot drift."""
from __future__ import annotations

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


def test_the_readme_is_short_and_links_every_docs_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)", readme))
    assert linked == {f"docs/{p.name}" for p in DOCS.glob("*.md")}


def test_relative_links_in_the_docs_resolve():
    broken = []
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
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
