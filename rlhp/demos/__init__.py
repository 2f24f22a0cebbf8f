"""Demonstrations: experts (trained, .zip, zoo Hub repos) and ``rlhp-collect``, which saves their episodes."""
