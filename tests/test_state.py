"""A part's state as data (rlhp.data.state): what is saved, how it comes back into freshly built parts, and that a
file names no code to run."""

import collections
import json
import random

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rlhp.data import Trajectory
from rlhp.data.state import Arrays, Loader, Saver
from rlhp.errors import DataError


class Part:
    """A part as a config builds it: data, code and a shared list."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.count = 0
        self.scores = np.zeros(4)
        self.net = torch.nn.Linear(3, 2)
        self.optimiser = torch.optim.Adam(self.net.parameters(), lr=0.1)
        self.seen: list[float] = []
        self.also_seen = self.seen
        self.rule = lambda x: x + 1
        self.kept: collections.deque = collections.deque(maxlen=3)

    def step(self) -> None:
        self.count += 1
        self.scores += self.rng.normal(size=4)
        self.seen.append(float(self.rng.random()))
        self.kept.append(self.count)
        loss = self.net(torch.ones(1, 3)).pow(2).sum()
        self.optimiser.zero_grad()
        loss.backward()
        self.optimiser.step()


def through_json(obj: object) -> tuple[dict, Arrays]:
    arrays = Arrays({})
    return json.loads(json.dumps(Saver(arrays)(obj))), arrays


def test_a_part_loaded_into_a_fresh_one_steps_on_as_the_original():
    original = Part()
    for _ in range(3):
        original.step()
    tree, arrays = through_json(original)
    fresh = Part(seed=99)
    net_weight, rule = fresh.net.weight, fresh.rule
    Loader(arrays).load(tree, fresh, "part")
    # In place: the optimiser still holds the net's own tensors, the code is the fresh part's own.
    assert fresh.net.weight is net_weight and fresh.rule is rule and fresh.also_seen is fresh.seen
    for part in (original, fresh):
        part.step()
    assert fresh.count == original.count == 4 and fresh.seen == original.seen and list(fresh.kept) == [2, 3, 4]
    np.testing.assert_array_equal(fresh.scores, original.scores)
    assert torch.equal(fresh.net.weight, original.net.weight)


def test_records_come_back_new_with_their_arrays_and_shared_places_stay_shared():
    episode = Trajectory(obs=np.arange(12.0).reshape(4, 3), acts=np.zeros((3, 1)), rews=np.ones(3, np.float32),
                         terminal=True, infos=[{"a": 1}, {"a": 1}, {"b": (2, "x")}])
    tree, arrays = through_json({"pool": [episode, episode], "gen": random.Random(3)})
    back = Loader(arrays)(tree)
    first, second = back["pool"]
    assert first is second and first is not episode
    np.testing.assert_array_equal(first.obs, episode.obs)
    assert first.infos == episode.infos and first.rews.dtype == np.float32 and first.terminal is True
    assert back["gen"].random() == random.Random(3).random()


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner) | st.tuples(inner, inner) | st.dictionaries(st.text(), inner)
                    | st.dictionaries(st.integers(), inner)))
def test_any_tree_of_plain_values_comes_back_equal_and_of_the_same_types(value):
    tree, arrays = through_json(value)
    back = Loader(arrays)(tree)
    assert back == value and repr(back) == repr(value)  # a tuple stays a tuple, an int key an int


@pytest.mark.parametrize("node, problem", [
    ({"object": "Popen", "state": {"args": "touch pwned"}}, "holds a Popen, where this config builds nothing"),
    ({"object": "Trajectory", "state": {"__class__": "x"}}, "must map attribute names to values"),
    ({"generator": {"dict": {"bit_generator": "Evil"}}}, "a random generator of an unknown kind"),
    ({"ndarray": {"array": "a0"}}, "missing from arrays.npz"),
    ({"ref": 7}, "which nothing before it defined"),
    ({"eval": "__import__('os')"}, "not a node of the state format"),
])
def test_a_crafted_tree_is_refused_in_one_line_naming_where(node, problem):
    with pytest.raises(DataError, match=problem) as err:
        Loader(Arrays({}))({"dict": {"part": node}}, {}, "loop")
    assert "\n" not in str(err.value) and "loop['part']" in str(err.value)


def test_arrays_of_python_objects_are_not_data():
    with pytest.raises(DataError, match="an array of Python objects"):
        Saver(Arrays({}))(np.array([{"a": 1}], dtype=object))
    with pytest.raises(DataError, match="are not data"):
        Loader(Arrays({}))({"scalar": 1, "dtype": "|O"})


def test_one_value_the_config_shares_where_the_file_holds_two_becomes_two():
    saved = {"a": [1], "b": [2]}  # the run replaced one of them since it was built
    shared: list[int] = []
    fresh = {"a": shared, "b": shared}
    tree, arrays = through_json(saved)
    back = Loader(arrays).load(tree, fresh)
    assert back == {"a": [1], "b": [2]} and back["a"] is shared and back["b"] is not shared
