"""Labelling by people: the annotation web app and ``rlhp-annotate``, which serve a run folder's queries."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")
"""Addresses only this machine reaches: the server listens there without a token."""
