"""The docs as a reader meets them: links that lead somewhere, no folder of one machine, no commit hash, and a
results page that opens with its headline table."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
HEX = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text))


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m) for m in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [a or b for a, b in LINK.findall(text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(target)
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(target)
    assert not broken, f"{page.name}: {broken}"


def test_the_link_check_finds_a_broken_link_and_a_missing_heading(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\n[ok](a.md#title) [gone](b.md) [no heading](a.md#other)\n")
    page = tmp_path / "a.md"
    assert links(page) == ["a.md#title", "b.md", "a.md#other"]
    assert anchors(page) == {"title"} and slug("MinAtar from pixels (`x`)") == "minatar-from-pixels-x"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_names_a_folder_of_one_machine_or_a_commit(page):
    text = page.read_text()
    assert not re.findall(r"(?<![\w.])/(work|tmp|root|home)/", text), page.name
    assert not HEX.findall(text), f"{page.name}: {HEX.findall(text)}"
    assert "this VM" not in text, page.name


def test_the_results_page_opens_with_its_headline_table_and_stays_short():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert len(text.splitlines()) <= 400
    first = re.search(r"^## (.+)$", text, flags=re.M).group(1)
    assert first == "Headline"
    table = text.split("## Headline", 1)[1].split("\n## ", 1)[0]
    assert "| experiment |" in table and "fresh seeds" in table


ROW_LIMIT = 500
"""A table row longer than this is prose in a cell: it belongs in a paragraph under the table."""


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_table_row_is_a_paragraph(page):
    long = [(n, len(line)) for n, line in enumerate(page.read_text().splitlines(), 1)
            if line.startswith("|") and len(line) > ROW_LIMIT]
    assert not long, f"{page.name}: rows over {ROW_LIMIT} characters (line, length): {long}"


def test_the_headline_has_one_row_per_experiment():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    headline = text.split("## Headline", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in headline.splitlines() if line.startswith("| `")]
    names = [re.findall(r"`([^`]+)`", row.split(" | ")[0]) for row in rows]
    assert len(rows) > 10 and all(len(n) == 1 for n in names), [n for n in names if len(n) != 1]
    assert {"bpref/walker_walk", "bpref/cheetah_run", "bpref/window_open", "bpref/door_open",
            "bpref/button_press"} <= {n[0] for n in names}


def test_the_readme_explains_the_words_rlhp_uses():
    glossary = (ROOT / "README.md").read_text().split("## Words", 1)[1].split("\n## ", 1)[0]
    for word in ("round", "querent", "gatherer", "fragmenter", "ceiling"):
        assert re.search(rf"^\| {word} \| ", glossary, re.M), word
