"""Files written whole or not at all (rlhp.files)."""

import pytest

from rlhp.files import HALF_WRITTEN, written_whole


def test_a_failed_write_leaves_the_old_file_and_no_half_written_one(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text("old")
    with pytest.raises(RuntimeError), written_whole(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash")
    assert path.read_text() == "old" and list(tmp_path.iterdir()) == [path]


def test_a_folder_replaces_the_folder_there_and_a_crashs_leftover_is_cleared(tmp_path):
    path = tmp_path / "round_0001"
    (path / "old").mkdir(parents=True)
    leftover = tmp_path / ("round_0001" + HALF_WRITTEN)
    (leftover / "stale").mkdir(parents=True)
    with written_whole(path) as tmp:
        assert not tmp.exists()  # a crash's half-written folder does not leak into the new one
        (tmp / "new").mkdir(parents=True)
    assert [p.name for p in path.iterdir()] == ["new"] and not leftover.exists()
