"""The loop with small fake parts (one source, one agent, one half-answering gatherer), and its checks."""

import copy
import math
import threading

import numpy as np
import pytest
import torch
from gymnasium import spaces
from helpers import loaded_into, trajectory

from rlhp.agents import Agent, AgentReport, NoAgent
from rlhp.data import PreferenceDataset
from rlhp.envs import FIXED_HORIZON_CARTPOLE, GymEnv
from rlhp.errors import ArgumentError, VariableHorizonError
from rlhp.feedback import OracleGatherer, Querent
from rlhp.loop import (
    AsynchronousPreferenceLearning,
    Callback,
    Loop,
    PreferenceLearning,
    RewardLearning,
    check_fixed_horizon,
)
from rlhp.loop.fragmenters import RandomFragmenter
from rlhp.loop.pools import THIS_ROUND, QueryPool
from rlhp.rewards import RewardNet
from rlhp.sources import TrajectorySource
from rlhp.training import PseudoLabels, RewardTrainer

ENV = GymEnv(FIXED_HORIZON_CARTPOLE, n_envs=1)  # the run's env, which the fake sources below never step


def test_fixed_horizon_check():
    lengths: dict[int, bool] = {}
    check_fixed_horizon([trajectory(10), trajectory(10, terminal=True)], lengths)
    check_fixed_horizon([trajectory(10)], lengths)
    with pytest.raises(VariableHorizonError, match="leaks the reward"):
        check_fixed_horizon([trajectory(7, terminal=True)], lengths)
    # Time-limit truncations of different lengths alone are no leak.
    check_fixed_horizon([trajectory(3), trajectory(5)], {})
    # The refusal says the env's own fix where it has one.
    with pytest.raises(VariableHorizonError, match=r"To fix it, add \+env.kwargs.x=false; or set allow_variable"):
        check_fixed_horizon([trajectory(7, terminal=True), trajectory(9)], {}, "add +env.kwargs.x=false")


class FakeAgent(Agent):
    """Trains nothing; counts what it is asked for, in whole rollouts of 100 steps."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    @property
    def rollout_steps(self) -> int:
        return 100

    def train(self, steps: int) -> AgentReport:
        self.asked.append(steps)
        return AgentReport(steps - steps % 100, np.array([1.0, 3.0]))

    def named_parameters(self):
        return iter([("w", torch.ones(2))])

    def policy(self, obs):
        return np.zeros(len(obs), np.int64)


class FakeSource(TrajectorySource):
    """Trajectories of 50 steps whose reward rises along the episode; records each request."""

    def __init__(self, agent: Agent) -> None:
        self._agent, self.asked = agent, []

    @property
    def agent(self) -> Agent:
        return self._agent

    def sample(self, steps: int) -> list:
        self.asked.append(steps)
        return [trajectory(50, offset=i) for i in range(math.ceil(steps / 50))]

    def held_out(self, steps: int) -> list:
        return []


class EvenIdsGatherer(OracleGatherer):
    """A person who answers only the queries with even ids, preferring the first fragment."""

    def answer(self, pairs, ids):
        done = ids % 2 == 0
        return done, np.ones(int(done.sum()), np.float32)

    def metrics(self):
        return {"pending": float(len(self.pending_ids))}


class SpyTrainer(RewardTrainer):
    def train(self, dataset, epoch_multiplier=1.0, **clips):
        self.multipliers = [*getattr(self, "multipliers", []), epoch_multiplier]
        self.events = [*getattr(self, "events", []), f"train on {len(dataset)}"]
        return super().train(dataset, epoch_multiplier, **clips)


class Recorder(Callback):
    """Keeps every round's result and the label batches it is told of, in order with the trainer's calls."""

    def __init__(self, trainer: SpyTrainer | None = None) -> None:
        self.results, self.trainer = [], trainer

    def on_labels(self, iteration, answers):
        if self.trainer is not None:
            self.trainer.events = [*getattr(self.trainer, "events", []), f"labels {answers.ids.tolist()}"]

    def __call__(self, loop, result):
        self.results.append(result)

    @property
    def rows(self):
        return [r.metrics for r in self.results]


def make_loop(agent: Agent, comparisons=(6, 4, 4), max_size=None, seed=0, total_timesteps=1000,
              pool: QueryPool = THIS_ROUND, trainer: type[RewardTrainer] = SpyTrainer,
              asynchronous: bool = False, reward_updates: str = "every_round") -> Loop:
    rng = np.random.default_rng(seed)
    net = RewardNet(spaces.Box(-np.inf, np.inf, (1,), np.float32), spaces.Discrete(2), hidden_sizes=[8])
    source = FakeSource(agent)
    parts = dict(
        source=source, fragmenter=RandomFragmenter(rng, warning_threshold=0), querent=Querent(),
        gatherer=EvenIdsGatherer(), dataset=PreferenceDataset(max_size), reward_trainer=trainer(net, rng, epochs=1),
        reward_net_config={"hidden_sizes": [8]}, schedule=list(comparisons), fragment_length=5,
        transition_oversampling=1.5, initial_epoch_multiplier=7, pool=pool, reward_updates=reward_updates)
    learning = (AsynchronousPreferenceLearning(**parts, published=copy.deepcopy(net)) if asynchronous
                else PreferenceLearning(**parts))
    return Loop(ENV, source, source.agent, learning, len(comparisons), total_timesteps)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_with_reward_updates_new_labels_rounds_that_bring_no_label_train_no_reward(asynchronous):
    trained = {}
    for updates in ("every_round", "new_labels"):
        loop = make_loop(FakeAgent(), comparisons=(6, 4, 0, 0), asynchronous=asynchronous, reward_updates=updates)
        recorder = Recorder()
        loop.iterate([recorder])
        trained[updates] = (loop.reward_learning.reward_trainer.events, ["reward_loss" in r for r in recorder.rows])
    # Rounds 2 and 3 query nothing, so nothing new is answered: the paper's loop fits the same labels again.
    assert trained["every_round"] == (["train on 3", "train on 5", "train on 5", "train on 5"], [True] * 4)
    assert trained["new_labels"] == (["train on 3", "train on 5"], [True, True, False, False])


def test_reward_updates_takes_its_two_modes_only():
    with pytest.raises(ArgumentError, match="reward_updates must be one of every_round, new_labels, got 'never'"):
        make_loop(FakeAgent(), reward_updates="never")


def test_rounds_follow_the_schedule_and_carry_timesteps_over():
    agent = FakeAgent()
    loop = make_loop(agent)
    recorder = Recorder(loop.reward_learning.reward_trainer)
    loop.iterate([recorder])
    rows = recorder.rows
    # Each round samples ceil(oversampling * 2 * n * fragment_length) transitions for its n pairs.
    assert loop.source.asked == [math.ceil(1.5 * 2 * n * 5) for n in (6, 4, 4)]
    # Half the queries (even ids) are answered; the rest stay pending, across rounds.
    assert [r["comparisons"] for r in rows] == [3, 5, 7]
    assert [r["pending"] for r in rows] == [3, 5, 7]
    assert loop.reward_learning.gatherer.pending_ids.tolist() == [1, 3, 5, 7, 9, 11, 13]
    assert loop.reward_learning.dataset.ids.tolist() == [0, 2, 4, 6, 8, 10, 12]
    # Callbacks hear of each batch of labels before the reward trains on it, and get each round's result.
    assert loop.reward_learning.reward_trainer.events == [
        "labels [0, 2, 4]", "train on 3", "labels [6, 8]", "train on 5",
        "labels [10, 12]", "train on 7"]
    assert [r.answers.ids.tolist() for r in recorder.results] == [[0, 2, 4], [6, 8], [10, 12]]
    assert [len(r.sampled) for r in recorder.results] == [math.ceil(n / 50) for n in loop.source.asked]
    # The initial epoch multiplier applies in round 0 only.
    assert loop.reward_learning.reward_trainer.multipliers == [7, 1.0, 1.0]
    # Cumulative targets 334, 667, 1000: what round 0 could not fit in whole rollouts, round 1 asks for.
    assert agent.asked == [334, 667 - 300, 1000 - 600]
    assert [r["timesteps"] for r in rows] == [300, 600, 1000]
    assert rows[-1]["true_return_mean"] == 2.0 and rows[-1]["true_return_std"] == 1.0
    assert {"time_sample_s", "time_fragment_s", "time_gather_s", "time_reward_training_s",
            "time_agent_training_s", "reward_loss", "reward_accuracy", "gt_reward_loss"} <= set(rows[0])


def test_a_source_without_agent_trains_only_the_reward():
    loop = make_loop(NoAgent(), total_timesteps=0)
    recorder = Recorder()
    loop.iterate([recorder])
    final = recorder.rows[-1]
    assert loop.timesteps == 0 and final["timesteps"] == 0 and "true_return_mean" not in final
    assert "time_agent_training_s" not in final and "reward_loss" in final


def test_the_ceiling_trains_only_the_agent_in_the_same_rounds():
    agent = FakeAgent()
    source = FakeSource(agent)
    loop = Loop(ENV, source, source.agent, RewardLearning(), num_rounds=3, total_timesteps=1000)
    recorder = Recorder()
    loop.iterate([recorder])
    assert agent.asked == [334, 667 - 300, 1000 - 600] and source.asked == []
    assert [r["comparisons"] for r in recorder.rows] == [0, 0, 0]
    assert [r["timesteps"] for r in recorder.rows] == [300, 600, 1000]
    assert all(not r.sampled and not len(r.answers) for r in recorder.results)


def test_max_dataset_size_holds_inside_the_loop():
    loop = make_loop(FakeAgent(), comparisons=(10, 10, 10), max_size=8)
    loop.iterate()
    dataset = loop.reward_learning.dataset
    assert len(dataset) == 8 and dataset.ids.tolist() == list(range(14, 30, 2))


def test_a_loop_loaded_into_a_fresh_one_continues_as_the_original():
    # The save contract: a checkpoint is the loop's state as data, loaded into a loop built anew from its config.
    original = make_loop(FakeAgent(), seed=0)
    original.round()
    copy = loaded_into(original, make_loop(FakeAgent(), seed=0))
    state = torch.get_rng_state()
    a = original.round().metrics
    torch.set_rng_state(state)
    b = copy.round().metrics
    drop = {k for k in a if k.startswith("time_") or k == "wall_s"}
    assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}
    np.testing.assert_array_equal(original.reward_learning.dataset.labels, copy.reward_learning.dataset.labels)
    assert original.reward_learning.gatherer.pending_ids.tolist() == copy.reward_learning.gatherer.pending_ids.tolist()
    assert copy.iteration == 2 and copy.agent.asked == [334, 367]


def test_every_round_hands_the_trainer_ratio_times_the_labelled_pairs_unlabelled_from_its_own_sample():
    loop = make_loop(FakeAgent(), comparisons=(6, 0, 4))
    remembered = []
    loop.reward_learning.reward_trainer.pseudo_labels = PseudoLabels(ratio=3)
    loop.reward_learning.reward_trainer.remember_unlabelled = lambda pairs: remembered.append(pairs)
    recorder = Recorder()
    loop.iterate([recorder])
    # Round 0: 3 x (0 labelled + 6 asked); round 1, which asks for none, 3 x 3; round 2: 3 x (3 + 4).
    assert [len(p) for p in remembered] == [18, 9, 21]
    # Each samples as for the pairs it asks for, or as many as are labelled when that is more.
    assert loop.source.asked == [math.ceil(1.5 * 2 * n * 5) for n in (6, 3, 4)]
    for pairs, result in zip(remembered, recorder.results, strict=True):
        sampled = {float(t.obs[0, 0]) for t in result.sampled}  # each FakeSource trajectory starts at its offset
        assert {float(o) for o in (pairs.obs[..., 0, 0] - pairs.start).ravel()} <= sampled


def weights(net: RewardNet) -> list[torch.Tensor]:
    return [p.detach().clone() for p in net.parameters()]


class MeetingAgent(FakeAgent):
    """Keeps the weights of the reward it is paid at each call, then tells whoever waits that it trains."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[list[torch.Tensor]] = []
        self.trained = threading.Condition()
        self.net: RewardNet

    def train(self, steps: int) -> AgentReport:
        with self.trained:
            self.read.append(weights(self.net))
            self.trained.notify_all()
        return super().train(steps)


class WaitingTrainer(SpyTrainer):
    """Round k's update goes on only once the agent has trained in round k: in a loop that runs the two one after
    the other it would wait for ever (here, 20 s)."""

    agent: MeetingAgent

    def train(self, dataset, epoch_multiplier=1.0, **clips):
        round_ = len(getattr(self, "multipliers", []))
        with self.agent.trained:
            met = self.agent.trained.wait_for(lambda: len(self.agent.read) > round_, timeout=20 if round_ else 0)
        self.met = [*getattr(self, "met", []), met]
        return super().train(dataset, epoch_multiplier, **clips)


def test_an_asynchronous_update_trains_beside_the_agent_which_reads_the_last_published_reward():
    agent = MeetingAgent()
    loop = make_loop(agent, comparisons=(6, 4, 4, 4), trainer=WaitingTrainer, asynchronous=True)
    learning = loop.reward_learning
    agent.net, learning.reward_trainer.agent = learning.published, agent
    recorder = Recorder()
    ends = []  # the trainer's weights as each round ends

    class Ends(Callback):
        def __call__(self, loop, result):
            ends.append(weights(learning.reward_trainer.net))

    loop.iterate([recorder, Ends()])
    # Round 0 fitted the reward before the agent trained; rounds 1-3 trained it while the agent trained, and each
    # of them changed it.
    assert learning.reward_trainer.met == [False, True, True, True]
    assert all(not torch.equal(a[0], b[0]) for a, b in zip(ends, ends[1:]))
    # Each round's agent reads the reward published as the round before ended (round 0's: its own fit, first).
    for k, read in enumerate(agent.read):
        for got, want in zip(read, ends[max(k - 1, 0)], strict=True):
            assert torch.equal(got, want), k
    # Each round ends with the update settled and published: the agent's copy is the trainer's net again.
    assert learning.pending is None
    for got, want in zip(weights(learning.published), ends[-1], strict=True):
        assert torch.equal(got, want)
    rows = recorder.rows
    assert all("reward_loss" in row and "time_reward_wait_s" in row for row in rows[1:])
    assert "time_reward_wait_s" not in rows[0] and learning.reward_trainer.multipliers == [7, 1.0, 1.0, 1.0]


class FailingTrainer(SpyTrainer):
    def train(self, dataset, epoch_multiplier=1.0, **clips):
        if epoch_multiplier == 1.0:
            raise FloatingPointError("the update failed")
        return super().train(dataset, epoch_multiplier, **clips)


def test_an_asynchronous_update_that_fails_fails_its_round_after_the_agent_trained():
    agent = FakeAgent()
    loop = make_loop(agent, trainer=FailingTrainer, asynchronous=True)
    loop.round()
    with pytest.raises(FloatingPointError, match="the update failed"):
        loop.round()
    assert agent.asked == [334, 367] and loop.iteration == 1  # the round is not counted as done


def test_an_asynchronous_loop_loaded_between_rounds_continues_as_the_original():
    original = make_loop(FakeAgent(), seed=0, asynchronous=True)
    original.round()
    original.round()
    twin = loaded_into(original, make_loop(FakeAgent(), seed=0, asynchronous=True))
    a, b = original.round().metrics, twin.round().metrics
    drop = {k for k in a if k.startswith("time_") or k == "wall_s"}
    assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}
    for got, want in zip(weights(twin.reward_learning.published), weights(original.reward_learning.published),
                         strict=True):
        assert torch.equal(got, want)
