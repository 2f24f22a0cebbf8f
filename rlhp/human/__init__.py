"""People in the loop: the web querent that publishes clips, the gatherer that waits for people's labels,
the query store they share (SQLite), and the labelling server with its page (:mod:`rlhp.human.server`),
which never imports training code.

This package's ``__init__`` imports nothing, so the server loads without the training side."""
