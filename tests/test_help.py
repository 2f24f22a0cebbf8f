"""``rlhp-train --help`` is a page a person reads, and a group spelt the wrong way is answered with the right one."""

from __future__ import annotations

import pytest
from helpers import config_groups, run_cli

from rlhp.experiment.help import GROUPS, train_groups


def test_the_help_opens_with_examples_then_every_group_with_what_it_builds(tmp_path):
    proc = run_cli("rlhp-train", "--help", cwd=tmp_path)
    lines = proc.stdout.splitlines()
    head = "\n".join(lines[:40])
    assert "Examples:" in head and "rlhp-train experiment=bpref/walker_walk method=qpa" in head
    assert "resume=" in head and "gatherer=human" in head and "-m " in head
    groups = [g for g in config_groups(skip={"expert"}) if not g.startswith("experiment/")]
    for group in groups:  # one line each, with its description and options
        line = next((li for li in lines if li.split() and li.split()[0] == group), None)
        assert line is not None and GROUPS[group] in line, group
    assert "experiment/bpref" not in proc.stdout and "bpref/<task>" in head
    assert "== Config ==" not in proc.stdout and "_target_" not in proc.stdout  # the dump is --cfg job's
    assert "--cfg job" in proc.stdout and "docs/configuration.md" in proc.stdout
    assert max(len(li) for li in lines) <= 120
    assert not list(tmp_path.iterdir())


def test_every_group_has_a_description_and_none_is_stale():
    assert set(train_groups()) == set(GROUPS)


@pytest.mark.parametrize(("override", "right"), [("experiment/bpref=walker_walk", "experiment=bpref/walker_walk"),
                                                 ("experiment/offline=hopper_medium_replay",
                                                  "experiment=offline/hopper_medium_replay")])
def test_an_option_folder_spelt_as_a_group_gets_the_right_spelling(tmp_path, override, right):
    proc = run_cli("rlhp-train", override, cwd=tmp_path, check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.strip().endswith(f"not a group: write {right}")
    assert not list(tmp_path.iterdir())
