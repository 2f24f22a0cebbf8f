
import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import random_pairs, spaces

from rlhp.data import PreferenceDataset
from rlhp.errors import ArgumentError
from rlhp.preference_model import discounted_returns
from rlhp.rewards import RewardNet, RunningNorm
from rlhp.training import RewardTrainer


def per_member_reference(net: RewardNet, x: torch.Tensor, m: int) -> torch.Tensor:
    """The m-th member as a plain MLP, one layer at a time."""
    for i, (w, b) in enumerate(zip(net.body.weights, net.body.biases)):
        x = x @ w[m] + b[m, 0]
        if i < len(net.body.weights) - 1:
            x = torch.relu(x)
    return x.squeeze(-1)


def shifted(pairs, scale: float = 4.0, shift: float = 3.0):
    """The pairs with observations far from standard, so a fitted normaliser is far from identity."""
    pairs.frames = pairs.frames * scale + shift
    return pairs


@pytest.mark.parametrize("hidden_sizes", [[], [64, 64]])
def test_members_start_as_torch_linear_layers_do(hidden_sizes):
    """Each layer's weights and biases uniform in +-1/sqrt(fan_in), per member (nn.Linear's default)."""
    torch.manual_seed(0)
    body = RewardNet(*spaces(obs_dim=30), members=40, hidden_sizes=hidden_sizes).body
    for w, b in zip(body.weights, body.biases):
        bound = 1 / np.sqrt(w.shape[1])
        for p in (w, b):
            assert p.abs().max() <= bound and p.min() < -0.9 * bound and p.max() > 0.9 * bound


def test_ensemble_in_one_op_equals_each_member_alone():
    net = RewardNet(*spaces(), members=4, use_action=True, normalize_input=True)
    pairs = shifted(random_pairs(7, length=5))
    net.fit_input_norm(*shifted(random_pairs(50, length=5, seed=1)).tensors())
    out = net(*pairs.tensors())
    assert out.shape == (4, 7, 2, 5)
    obs = torch.as_tensor(pairs.obs).reshape(-1, 3)
    acts = torch.nn.functional.one_hot(torch.as_tensor(pairs.acts).reshape(-1), 2).float()
    x = (torch.cat([obs, acts], dim=-1) - net.input_norm.mean) / torch.sqrt(net.input_norm.var + 1e-5)
    assert (net.input_norm.mean[:3] - 3).abs().max() < 1  # the normaliser is far from identity
    for m in range(4):
        torch.testing.assert_close(out[m].reshape(-1), per_member_reference(net, x.clamp(-5, 5), m))


def test_per_member_inputs_score_each_member_on_its_own_rows():
    net = RewardNet(*spaces(), members=3)
    pairs = random_pairs(6, length=4)
    idx = torch.tensor([[0, 1], [2, 3], [4, 5]])
    out = net(*(t[idx] for t in pairs.tensors()), per_member=True)
    full = net(*pairs.tensors())
    assert out.shape == (3, 2, 2, 4)
    for m in range(3):
        torch.testing.assert_close(out[m], full[m, idx[m]])


@pytest.mark.parametrize("members", [1, 3])
@pytest.mark.parametrize("discount_factor", [1.0, 0.9])
@pytest.mark.parametrize("shaping_gamma", [None, 0.9])
@pytest.mark.parametrize("length", [6, 2])  # 2 steps: the output bias counts twice, as any other scale
@pytest.mark.parametrize("output", ["linear", "tanh"])
def test_returns_and_their_gradients_equal_the_discounted_sum_of_per_step_rewards(members, discount_factor,
                                                                                  shaping_gamma, length, output):
    net = RewardNet(*spaces(), members=members, shaping_gamma=shaping_gamma, output=output)
    pairs = random_pairs(9, length)
    inputs = net.encode(*(t[torch.arange(3 * members).reshape(members, 3)] for t in pairs.tensors()))
    returns = net.returns(inputs, discount_factor, per_member=True)
    grads = torch.autograd.grad(returns.square().sum(), list(net.parameters()))
    per_step = discounted_returns(net.score(inputs, per_member=True), discount_factor)
    assert returns.shape == per_step.shape == (members, 3, 2)
    torch.testing.assert_close(returns, per_step)
    for got, want in zip(grads, torch.autograd.grad(per_step.square().sum(), list(net.parameters()))):
        torch.testing.assert_close(got, want)


def test_shaping_adds_gamma_next_potential_minus_potential():
    net = RewardNet(*spaces(), shaping_gamma=0.9, input_clip=None, normalize_input=True)
    net.fit_input_norm(*shifted(random_pairs(50, length=4, seed=1)).tensors())
    pairs = shifted(random_pairs(3, length=4))
    pairs.dones[:, :, -1] = True
    shaped = net(*pairs.tensors())
    potential, net.potential = net.potential, None
    base = net(*pairs.tensors())
    state_norm = net.state_norm
    assert (state_norm.mean - 3).abs().max() < 1  # the potential sees standardised states

    def phi_of(obs):
        return potential(state_norm(torch.as_tensor(obs).reshape(1, -1, 3))).reshape(pairs.dones.shape)

    phi, next_phi = phi_of(pairs.obs), phi_of(pairs.next_obs)
    not_done = 1 - torch.as_tensor(pairs.dones).float()
    torch.testing.assert_close(shaped - base, (0.9 * next_phi * not_done - phi)[None])


@pytest.mark.parametrize("coef", [2.0, -0.5])  # a bonus where members disagree, or a penalty
def test_agent_reward_adds_std_bonus(coef: float):
    net = RewardNet(*spaces(), members=5, std_coef=coef, normalize_output=False)
    pairs = random_pairs(4, length=3)
    rew = net(*pairs.tensors())
    expected = rew.mean(0) + coef * rew.std(0)
    got = net.agent_reward(pairs.obs, pairs.acts, pairs.next_obs, pairs.dones)
    torch.testing.assert_close(torch.as_tensor(got), expected)


def test_the_std_bonus_decays_over_the_agents_steps_and_not_over_relabelling():
    net = RewardNet(*spaces(), members=5, std_coef=2.0, std_decay=0.01, normalize_output=False)
    pairs = random_pairs(4, length=3)  # 24 transitions a call
    obs, acts, next_obs, dones = (a.reshape(-1, *a.shape[3:]) for a in (pairs.obs, pairs.acts, pairs.next_obs,
                                                                        pairs.dones))
    rew = net(*(torch.as_tensor(a) for a in (obs, acts, next_obs, dones)))
    for steps in (0, 24, 48):  # the beta of a batch is the one before its steps
        got = net.agent_reward(obs, acts, next_obs, dones)
        torch.testing.assert_close(torch.as_tensor(got), rew.mean(0) + 2.0 * 0.99 ** steps * rew.std(0))
    assert net.bonus_steps == 72 and net.std_beta == pytest.approx(2.0 * 0.99 ** 72)
    net.agent_reward(obs, acts, next_obs, dones, update_stats=False)  # a replay buffer relabelled
    assert net.bonus_steps == 72
    assert RewardNet(*spaces(), members=5, std_coef=2.0).std_beta == 2.0  # no decay by default
    for bad in (-0.1, 1.0):
        with pytest.raises(ArgumentError, match="std_decay"):
            RewardNet(*spaces(), members=5, std_coef=2.0, std_decay=bad)


def test_publishing_gives_the_agents_copy_the_trained_weights_and_the_trainer_the_agents_statistics():
    trained = RewardNet(*spaces(), members=3, std_coef=2.0, std_decay=0.01)
    copy = RewardNet(*spaces(), members=3, std_coef=2.0, std_decay=0.01)
    copy.load_state_dict(trained.state_dict())
    pairs = random_pairs(4, length=3)  # 24 transitions
    steps = (a.reshape(-1, *a.shape[3:]) for a in (pairs.obs, pairs.acts, pairs.next_obs, pairs.dones))
    copy.agent_reward(*steps)  # the agent's steps, on its copy
    with torch.no_grad():  # training, on the trainer's net
        trained.body.weights[0].add_(1.0)
    trained.fit_input_norm(*pairs.tensors())
    statistics = {k: v.clone() for k, v in copy.norm.state_dict().items()}
    trained.publish_to(copy)
    assert trained.bonus_steps == copy.bonus_steps == 24
    for key, value in trained.state_dict().items():
        torch.testing.assert_close(copy.state_dict()[key], value, rtol=0, atol=0, msg=key)
    for key, value in statistics.items():
        torch.testing.assert_close(trained.norm.state_dict()[key], value, rtol=0, atol=0, msg=key)
    assert trained.norm.count == 24 and not torch.equal(trained.input_norm.mean, torch.zeros_like(copy.input_norm.mean))


def test_running_norm_matches_whole_batch_statistics():
    norm, x = RunningNorm((3,)), torch.randn(1000, 3) * torch.tensor([1.0, 5.0, 0.1]) + 2
    for chunk in x.split(77):
        with torch.inference_mode():
            norm(chunk, update=True)
    torch.testing.assert_close(norm.mean, x.mean(0))
    torch.testing.assert_close(norm.var, x.var(0, unbiased=False))
    torch.testing.assert_close(norm(x), (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + 1e-5))


def test_running_norm_counts_past_float32s_exact_integers():
    """An agent's reward is normalised over every env step: tens of millions, where float32 stops counting."""
    norm = RunningNorm()
    norm.count.fill_(2**24)
    norm(torch.zeros(1), update=True)
    assert norm.count.item() == 2**24 + 1


def test_input_statistics_are_refitted_to_each_round_of_preferences():
    net = RewardNet(*spaces(), normalize_input=True)
    trainer = RewardTrainer(net, np.random.default_rng(0), epochs=1)
    for shift in (0.0, 10.0):
        ds = PreferenceDataset()
        pairs = shifted(random_pairs(40, length=5), scale=1.0, shift=shift)
        ds.push(pairs, np.full(40, 0.5, np.float32), np.arange(40))
        trainer.train(ds)
        obs = pairs.obs.reshape(-1, 3)
        # Refitted to this round's data alone, not blended with the previous round's.
        torch.testing.assert_close(net.input_norm.mean[:3], torch.as_tensor(obs.mean(0)), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(net.input_norm.var[:3], torch.as_tensor(obs.var(0)), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("side", [1.0, -1.0])
def test_input_clip_makes_far_away_states_look_alike(side):
    far, edge = (random_pairs(2, length=3) for _ in range(2))
    far.obs[..., 0], edge.obs[..., 0] = 100.0 * side, 5.0 * side
    clipped = RewardNet(*spaces(), normalize_input=False, input_clip=5.0)
    torch.testing.assert_close(clipped(*far.tensors()), clipped(*edge.tensors()))
    unclipped = RewardNet(*spaces(), normalize_input=False, input_clip=None)
    assert not torch.allclose(unclipped(*far.tensors()), unclipped(*edge.tensors()))


def test_running_output_normalisation_standardises_the_agent_reward():
    net = RewardNet(*spaces(), normalize_output=True)
    batches = [random_pairs(30, length=4, seed=s) for s in range(3)]
    raw = [net(*b.tensors()).mean(0).reshape(-1) for b in batches]
    outs = [net.agent_reward(b.obs, b.acts, b.next_obs, b.dones).reshape(-1) for b in batches]
    seen = torch.cat(raw).detach()
    mean, var = seen.mean(), seen.var(unbiased=False)
    torch.testing.assert_close(torch.as_tensor(outs[-1]), ((raw[-1] - mean) / torch.sqrt(var + 1e-5)).detach())
    before = net.norm.mean.clone()
    net.agent_reward(batches[0].obs, batches[0].acts, batches[0].next_obs, batches[0].dones, update_stats=False)
    assert torch.equal(net.norm.mean, before) and net.norm.count == 3 * 30 * 2 * 4


def test_discrete_and_image_observations_are_preprocessed_as_sb3_does():
    discrete = RewardNet(gym.spaces.Discrete(4), gym.spaces.Discrete(2), use_action=False, normalize_input=False)
    obs = torch.tensor([[2, 0], [3, 1]])
    x, *_ = discrete._inputs(obs, torch.zeros(2, 2, dtype=torch.long), obs, torch.zeros(2, 2, dtype=torch.bool))
    torch.testing.assert_close(x, torch.nn.functional.one_hot(obs.reshape(-1), 4).float())
    image_space = gym.spaces.Box(0, 255, (6, 6, 3), np.uint8)
    image = RewardNet(image_space, gym.spaces.Discrete(2), use_action=False, normalize_input=False)
    frames = torch.randint(0, 256, (2, 5, 6, 6, 3), dtype=torch.uint8)
    x, *_ = image._inputs(frames, torch.zeros(2, 5, dtype=torch.long), frames, torch.zeros(2, 5, dtype=torch.bool))
    torch.testing.assert_close(x, frames.reshape(10, -1).float() / 255)


def test_a_tanh_output_bounds_each_members_step_reward_however_large_its_weights():
    net = RewardNet(*spaces(), members=3, output="tanh")
    linear = RewardNet(*spaces(), members=3)
    linear.load_state_dict(net.state_dict())
    with torch.no_grad():
        for w in [*net.body.weights, *linear.body.weights]:
            w.mul_(100.0)
    pairs = random_pairs(20, length=5).tensors()
    bounded, unbounded = net(*pairs), linear(*pairs)
    assert unbounded.abs().max() > 10  # the weights push a linear output far out
    torch.testing.assert_close(bounded, torch.tanh(unbounded))
    assert bounded.abs().max() <= 1.0


def test_the_defaults_are_the_documented_ones():
    net = RewardNet(*spaces())
    assert net.use == (True, True, False, False) and net.members == 1 and net.potential is None
    assert net.input_norm is not None and net.input_clip == 5.0 and net.norm is not None and net.std_coef == 0.0
    assert net.output == "linear"


@pytest.mark.parametrize(("options", "argument", "says"), [
    ({"use_state": False, "use_action": False}, "use_state",
     "and use_action, use_next_state, use_done are all false: the net sees nothing"),
    ({"members": 0}, "members", "must lie in [1, 256], got 0"),
    ({"members": 257}, "members", "must lie in [1, 256], got 257"),
    ({"hidden_sizes": [8, 0]}, "hidden_sizes", "must be widths in [1, 65536], got [8, 0]"),
    ({"hidden_sizes": [65_537]}, "hidden_sizes", "must be widths in [1, 65536], got [65537]"),
    ({"output": "sigmoid"}, "output", "must be one of linear, tanh, got 'sigmoid'"),
])
def test_bad_options_are_refused_by_key(options, argument, says):
    with pytest.raises(ArgumentError) as err:
        RewardNet(*spaces(), **options)
    assert err.value.argument == argument and err.value.problem == says


@pytest.mark.parametrize("options", [
    {"use_state": False, "use_action": False, "use_next_state": True},  # one input is enough, whichever it is
    {"use_state": False, "use_action": False, "use_done": True},
    {"use_state": False, "shaping_gamma": 0.9},  # the potential reads states the reward itself does not
    {"members": 256, "hidden_sizes": [1]},
    {"hidden_sizes": [65_536]},
])
def test_options_at_their_bounds_build_a_net_that_scores(options):
    net = RewardNet(*spaces(), **options)
    rews = net(*random_pairs(2, length=3).tensors())
    assert rews.shape == (options.get("members", 1), 2, 2, 3) and torch.isfinite(rews).all()
