"""``python -m rlhp.human.server``: the same as ``rlhp-annotate``."""

from rlhp.human.server.cli import main

main()
