"""The generated blocks of a docs page: a benchmark rewrites only the text between its two markers,
``<!-- name: ... -->`` and ``<!-- /name -->``, so the notes around it are kept."""

from __future__ import annotations

import argparse
import re
from pathlib import Path


def _span(content: str, page: Path, name: str) -> tuple[int, int]:
    """Where ``name``'s block lies in ``content``: from the start of the line after its opening marker to its
    closing marker."""
    # The name ends at ':' or ' -->', so that block "a" is not found in a block "a_b" placed before it.
    opening = re.search(rf"<!-- {re.escape(name)}(:| -->)", content)
    if opening is None:
        raise SystemExit(f"{page} has no <!-- {name} --> block")
    return content.index("\n", opening.start()) + 1, content.index(f"<!-- /{name} -->")


def read_block(page: Path, name: str) -> str:
    """The text between ``page``'s markers for ``name``."""
    content = page.read_text()
    begin, end = _span(content, page, name)
    return content[begin:end]


def write_block(page: Path, name: str, text: str) -> None:
    """Replace the lines between ``page``'s markers for ``name`` with ``text``."""
    content = page.read_text()
    begin, end = _span(content, page, name)
    page.write_text(content[:begin] + text + "\n" + content[end:])
    print(f"wrote the {name} block of {page}")


def show(text: str, page: Path | None, name: str) -> None:
    """Print ``text`` when no ``page`` is given, else write it as ``page``'s ``name`` block."""
    if page is None:
        print(text)
    else:
        write_block(page, name, text)


def add_run_options(parser: argparse.ArgumentParser, root: str, block: str) -> None:
    """The options of a benchmark that runs ``rlhp-train``: settings for every run, the folder its runs go to
    (a finished run there is reused), and the page and block it writes."""
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for every run (repeat for more)")
    parser.add_argument("--root", type=Path, default=Path(root))
    parser.add_argument("--out", type=Path, default=None, help="write the page here (else print it)")
    parser.add_argument("--block", default=block, help="the marked block of --out to write")
