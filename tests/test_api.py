"""rlhp.api: a part of one's own, from a module outside rlhp, is checked against its interface when built."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from helpers import run_cli

import rlhp.api as api
from rlhp.api import INTERFACES, misfit
from rlhp.loop.fragmenters import RandomFragmenter
from rlhp.training.augment import WholeFragments
from rlhp.training.filters import KeepAll

MODULE = '''
from rlhp.loop.fragmenters import RandomFragmenter


class Later:
    """A query selector of one's own: random pairs (a stand-in for a rule of one's own)."""

    def __init__(self, rng, share: float = 0.5) -> None:
        self.random, self.share = RandomFragmenter(rng), share

    def __call__(self, trajectories, fragment_length, num_pairs):
        return self.random(trajectories, fragment_length, num_pairs)


class LaterWithUniform(Later):
    def uniform(self, trajectories, fragment_length, num_pairs):
        return self.random.uniform(trajectories, fragment_length, num_pairs)


class LaterWithAWrongUniform(Later):
    def uniform(self, trajectories):
        return self.random.uniform(trajectories, 10, 1)
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A folder outside the repo holding the user's module, on PYTHONPATH as a user's would be."""
    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "selector.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.setenv("PYTHONPATH", str(folder) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return folder


@pytest.mark.parametrize(("target", "problem"), [
    ("selector.Later", "lacks the method uniform() that rlhp.api.Fragmenter requires"),
    ("selector.LaterWithAWrongUniform", "has uniform(trajectories), which cannot take the arguments of "
                                        "rlhp.api.Fragmenter.uniform"),
])
def test_a_part_that_does_not_fit_its_interface_is_refused_before_anything_trains(user_module, target, problem):
    # Without the check, Later runs until SURF asks for uniform pairs, then ends in an AttributeError.
    proc = run_cli("rlhp-train", "debug=fast", "logger=none", "~fragmenter", f"+fragmenter._target_={target}",
                   "+fragmenter.share=0.3", cwd=user_module, check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith(f"rlhp-train: config error: config key `fragmenter._target_` is {target}, which "
                                  f"{problem}")
    assert sorted(p.name for p in user_module.iterdir()) == ["selector.py"]  # nothing written, no outputs/


def test_a_part_of_ones_own_runs_with_no_edit_inside_rlhp(user_module):
    run = user_module / "run"
    run_cli("rlhp-train", "debug=fast", "logger=none", "~fragmenter", "+fragmenter._target_=selector.LaterWithUniform",
            "+fragmenter.share=0.3", "reward_trainer/pseudo_labels=surf", f"hydra.run.dir={run}", cwd=user_module)
    assert json.loads((run / "eval.json").read_text())["true_return_mean"] > 0
    assert "selector.LaterWithUniform" in (run / ".hydra" / "config.yaml").read_text()


def test_a_module_that_is_not_there_is_one_line(user_module):
    proc = run_cli("rlhp-train", "debug=fast", "~fragmenter", "+fragmenter._target_=nosuch.Selector", cwd=user_module,
                   check=False)
    assert proc.returncode == 2 and proc.stdout.strip().count("\n") <= 0 and "Error getting object" not in proc.stdout
    assert proc.stderr.strip() == ("rlhp-train: config error: config key `fragmenter._target_` is nosuch.Selector, "
                                   "which cannot be imported (ModuleNotFoundError: No module named 'nosuch'); a module "
                                   "of one's own must be on PYTHONPATH or installed")


def test_swapping_a_target_alone_says_how_to_drop_the_options_keys(user_module):
    proc = run_cli("rlhp-train", "debug=fast", "fragmenter._target_=selector.LaterWithUniform", cwd=user_module,
                   check=False)
    assert proc.returncode == 2 and "~fragmenter +fragmenter._target_=... drops the option's keys" in proc.stderr


def test_the_built_in_parts_fit_their_interfaces_and_a_misfit_is_named():
    assert misfit(RandomFragmenter(rng=None), INTERFACES["fragmenter"]) is None
    assert misfit(KeepAll(), INTERFACES["reward_trainer.label_filter"]) is None
    assert misfit(WholeFragments(), INTERFACES["reward_trainer.crop"]) is None
    assert misfit(KeepAll(), INTERFACES["reward_trainer.crop"]) == (
        "lacks the attribute copies that rlhp.api.Crop requires")
    assert misfit(object(), INTERFACES["reward_net"]) == "is no rlhp.api.RewardNet (subclass it)"
    assert set(api.__all__) >= {"Fragmenter", "PreferenceGatherer", "RewardNet", "LabelFilter", "INJECTED"}
    assert all(getattr(api, name).__doc__ for name in api.__all__ if isinstance(getattr(api, name), type))


def test_the_package_ships_its_type_hints():
    assert (api.__file__.rsplit("/", 1)[0] + "/py.typed") and os.path.isfile(
        os.path.join(os.path.dirname(api.__file__), "py.typed"))
