"""The generated blocks of a docs page: a benchmark rewrites only the text between its two markers,
``<!-- name: ... -->`` and ``<!-- /name -->``, so the notes around it are kept."""

from __future__ import annotations

import re
from pathlib import Path


def write_block(page: Path, name: str, text: str) -> None:
    """Replace the lines between ``page``'s markers for ``name`` with ``text``."""
    content = page.read_text()
    # The name ends at ':' or ' -->', so that block "a" is not found in a block "a_b" placed before it.
    opening = re.search(rf"<!-- {re.escape(name)}(:| -->)", content)
    if opening is None:
        raise SystemExit(f"{page} has no <!-- {name} --> block to write")
    begin, end = opening.start(), content.index(f"<!-- /{name} -->")
    page.write_text(content[:content.index("\n", begin) + 1] + text + "\n" + content[end:])
    print(f"wrote the {name} block of {page}")


def show(text: str, page: Path | None, name: str) -> None:
    """Print ``text`` when no ``page`` is given, else write it as ``page``'s ``name`` block."""
    if page is None:
        print(text)
    else:
        write_block(page, name, text)
