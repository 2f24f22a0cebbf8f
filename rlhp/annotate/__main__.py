"""``python -m rlhp.annotate``: the same as ``rlhp-annotate``."""

from rlhp.annotate.cli import main

main()
