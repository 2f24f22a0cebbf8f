"""The label-budget benchmark keeps the cells a docs block already holds measured (``--keep``), and only those."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
from bench_labels import measured_cells, solved_in  # noqa: E402
from docblock import read_block, write_block  # noqa: E402

BLOCK = """Final true return, by method and label budget.

| env | method | 100 labels (2.5 person-min) | the task's own budget | command |
|---|---|---:|---:|---|
| pendulum | plain | -175.9 ± 19.1 (5/5) | -170.2 ± 5.0 (5/5), 200 labels | `rlhp-train -m ...` |
| pendulum | +SURF | not run | -181.1 ± 28.8 (4/5), 200 labels | `rlhp-train -m ...` |
| pendulum | +RUNE | -170.0 ± 9.0 (3/3) | not run | `rlhp-train -m ...` |

B-Pref's imperfect teachers at 100 labels, same figures:

| env | teacher | plain | +robustness | command |
|---|---|---:|---:|---|
| pendulum | mistake (10% flipped) | -180.0 ± 10.0 (2/5) | not run | plain: `...` |
"""


def test_measured_cells_are_those_over_the_seeds_asked_and_nothing_else() -> None:
    cells = measured_cells(BLOCK, n_seeds=5)
    assert cells == {
        ("pendulum", "plain", "100 labels (2.5 person-min)"): "-175.9 ± 19.1 (5/5)",
        ("pendulum", "plain", "the task's own budget"): "-170.2 ± 5.0 (5/5), 200 labels",
        ("pendulum", "+SURF", "the task's own budget"): "-181.1 ± 28.8 (4/5), 200 labels",
        ("pendulum", "mistake (10% flipped)", "plain"): "-180.0 ± 10.0 (2/5)",
    }
    assert measured_cells(BLOCK, n_seeds=3) == {
        ("pendulum", "+RUNE", "100 labels (2.5 person-min)"): "-170.0 ± 9.0 (3/3)"}


def test_solved_is_read_from_the_cell() -> None:
    assert solved_in("-181.1 ± 28.8 (4/5), 200 labels") == 4
    assert solved_in("500.0 ± 0.0 (5/5)") == 5


def test_read_block_gives_what_write_block_wrote(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("before\n<!-- a_b: written -->\nold\n<!-- /a_b -->\n<!-- a: written -->\nold\n<!-- /a -->\nafter\n")
    write_block(page, "a", "new text")
    assert read_block(page, "a") == "new text\n"
    assert read_block(page, "a_b") == "old\n"
    assert page.read_text().startswith("before\n") and page.read_text().endswith("after\n")


@pytest.mark.slow
def test_keep_rewrites_a_block_of_kept_cells_unchanged_without_running(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"<!-- bench_labels: written -->\n{BLOCK}<!-- /bench_labels -->\n")
    root = tmp_path / "runs"
    args = [sys.executable, str(SCRIPTS / "bench_labels.py"), "--envs", "pendulum", "--methods", "plain", "+SURF",
            "--budgets", "100", "own", "--not-run", "+SURF@100", "--teachers", "mistake (10% flipped)",
            "--teacher-methods", "plain", "--keep", "--root", str(root), "--out", str(page)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=120)
    table = read_block(page, "bench_labels")
    assert "| pendulum | plain | -175.9 ± 19.1 (5/5) | -170.2 ± 5.0 (5/5), 200 labels |" in table
    assert "| pendulum | +SURF | not run | -181.1 ± 28.8 (4/5), 200 labels |" in table
    assert "| pendulum | mistake (10% flipped) | -180.0 ± 10.0 (2/5) |" in table
    assert not root.exists()  # nothing ran


def test_keep_needs_a_page() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPTS / "bench_labels.py"), "--keep"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "--keep reads the block of --out" in proc.stderr
