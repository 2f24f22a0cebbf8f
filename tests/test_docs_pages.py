"""The docs read as pages: tables a person can scan, a headline of one row per experiment, the words explained."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
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
