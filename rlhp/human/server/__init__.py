"""Labelling by people: the annotation web app and ``rlhp-annotate``, which serve a run folder's queries."""
