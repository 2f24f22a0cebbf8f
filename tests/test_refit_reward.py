"""scripts/refit_reward.py: a finished run's reward refitted on its own labels, round by round, under overrides."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
from refit_reward import main, refit  # noqa: E402

from rlhp.data import PreferenceDataset  # noqa: E402
from rlhp.runs import RunFolder  # noqa: E402


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A real CartPole run's folder: 3 rounds of labels, the episodes each sampled."""
    from helpers import FAST, run_cli

    where = tmp_path_factory.mktemp("refit")
    run_cli("rlhp-train", *FAST, "total_comparisons=30", f"hydra.run.dir={where / 'run'}", cwd=where)
    return where / "run"


def test_a_refit_has_a_row_per_labelled_round_with_the_run_s_labels_so_far(finished):
    rows = refit(RunFolder(finished), [], seed=0)
    saved = sorted(p.name for p in (finished / "labels").iterdir())
    assert [f"round_{r['round']:04d}" for r in rows] == saved
    per_round = [len(PreferenceDataset.load(finished / "labels" / s)) for s in saved]
    assert [r["labels"] for r in rows] == np.cumsum(per_round).tolist() and len(rows) > 1
    for row in rows:
        assert 0 <= row["accuracy"] <= 1 and -1 <= row["all"] <= 1
    assert all(-1 <= r["next"] <= 1 for r in rows[:-1]) and np.isnan(rows[-1]["next"])  # nothing after the last


def test_overrides_reach_the_refitted_reward(finished):
    trained = refit(RunFolder(finished), [], seed=0)
    frozen = refit(RunFolder(finished), ["reward_trainer.lr=1e-12"], seed=0)
    # The same initial net (the seed), never moved: its correlations differ from the trained one's.
    assert [r["all"] for r in trained] != [r["all"] for r in frozen]
    assert len({round(r["all"], 6) for r in frozen}) == 1  # a net that does not learn scores alike every round


@pytest.mark.parametrize(("argv", "message"), [
    (["reward_trainer.nope=1"], "nope` is not an option of RewardTrainer"),
    (["reward_net.output"], "no override of a part the run's config has"),
    (["nothing.here=1"], "no override of a part"),
    (["reward_trainer.lr=fast"], "reward_trainer.lr` must be a number"),
])
def test_bad_input_is_refused_with_a_message(finished, monkeypatch, argv, message):
    # The script's main in this process (a fresh interpreter a case cost 4 s): it may only exit with the message.
    monkeypatch.setattr(sys, "argv", ["refit_reward.py", str(finished), *argv])
    with pytest.raises(SystemExit, match=re.escape(message)):
        main()


def test_a_folder_that_is_no_run_is_refused_in_one_line_from_the_shell(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPTS / "refit_reward.py"), str(tmp_path)], capture_output=True,
                          text=True)
    assert proc.returncode != 0 and "is no run folder of rlhp-train" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_a_key_newer_than_the_run_can_be_set(finished, tmp_path):
    older = tmp_path / "older"
    shutil.copytree(finished, older)
    config = OmegaConf.load(older / ".hydra" / "config.yaml")
    del config.reward_trainer["stop_accuracy"]  # as a run written before the key existed
    OmegaConf.save(config, older / ".hydra" / "config.yaml")
    rows = refit(RunFolder(older), ["reward_trainer.stop_accuracy=0.5"], seed=0)
    assert len(rows) > 1
