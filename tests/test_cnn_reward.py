"""The CNN reward net: grouped convolutions are each member alone, members keep to their own rows, it learns
a reward drawn in pixels, and bad shapes are refused by key."""

import functools

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from stable_baselines3 import DQN

import rlhp.agents.agent as agent_module
from rlhp.agents import AgentTrainer
from rlhp.agents.extractors import SmallGridCNN
from rlhp.data import FragmentPairs, PreferenceDataset
from rlhp.envs import MinAtarEnv
from rlhp.errors import ArgumentError
from rlhp.rewards import CnnRewardNet
from rlhp.rewards.bodies import Dropout, masks_drawn_from
from rlhp.training import RewardTrainer

GRID = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)  # MinAtar-like: a channel per kind of object
ACTIONS = gym.spaces.Discrete(3)


def frames(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    return torch.as_tensor(np.random.default_rng(seed).integers(0, 2, shape, dtype=np.uint8))


def member_alone(net: CnnRewardNet, images: torch.Tensor, extra: torch.Tensor, m: int) -> torch.Tensor:
    """Member ``m`` as plain torch ops in eval mode: its slice of every convolution and batch norm, then its MLP."""
    x = images.float()
    for layer in net.body.convs:
        if isinstance(layer, torch.nn.Conv2d):
            rows = slice(m * layer.out_channels // net.members, (m + 1) * layer.out_channels // net.members)
            x = F.conv2d(x, layer.weight[rows], layer.bias[rows], layer.stride)
        elif isinstance(layer, torch.nn.BatchNorm2d):
            rows = slice(m * x.shape[1], (m + 1) * x.shape[1])
            x = F.batch_norm(x, layer.running_mean[rows], layer.running_var[rows], layer.weight[rows],
                             layer.bias[rows], eps=layer.eps)
        elif isinstance(layer, torch.nn.LeakyReLU):
            x = F.leaky_relu(x, 0.01)
    x = torch.cat([x.flatten(1), extra], dim=-1)
    (w1, w2), (b1, b2) = net.body.dense.weights, net.body.dense.biases
    return (F.leaky_relu(x @ w1[m] + b1[m, 0], 0.01) @ w2[m] + b2[m, 0]).squeeze(-1)


@pytest.mark.parametrize("use_action", [False, True])
def test_the_ensemble_in_one_pass_is_each_member_alone(use_action):
    torch.manual_seed(0)
    net = CnnRewardNet(GRID, ACTIONS, members=3, use_action=use_action)
    for layer in net.body.convs:  # running statistics far from the identity, so a wrong slice shows
        if isinstance(layer, torch.nn.BatchNorm2d):
            layer.running_mean.uniform_(-1, 1), layer.running_var.uniform_(0.5, 2)
    obs, acts = frames((6, *GRID.shape)), torch.tensor([0, 1, 2, 0, 1, 2])
    out = net(obs, acts, obs, torch.zeros(6))
    extra = F.one_hot(acts, 3).float() if use_action else torch.zeros(6, 0)
    assert out.shape == (3, 6)
    for m in range(3):
        torch.testing.assert_close(out[m], member_alone(net, obs, extra, m))


def test_in_training_each_member_sees_only_its_own_rows():
    torch.manual_seed(0)
    net = CnnRewardNet(GRID, ACTIONS, members=3, dropout=0.0).train()  # batch norm on batch statistics
    obs = frames((3, 8, *GRID.shape))
    zeros = torch.zeros(3, 8)
    before = net(obs, zeros.long(), obs, zeros, per_member=True)
    changed = obs.clone()
    changed[1] = frames((8, *GRID.shape), seed=1)  # member 1's bootstrap rows only
    after = net(changed, zeros.long(), changed, zeros, per_member=True)
    torch.testing.assert_close(after[[0, 2]], before[[0, 2]])
    assert not torch.allclose(after[1], before[1])


def test_summed_features_give_the_returns_of_summed_rewards():
    net = CnnRewardNet(GRID, ACTIONS, members=2)
    obs = frames((4, 2, 5, *GRID.shape))
    inputs = net.encode(obs, torch.zeros(4, 2, 5, dtype=torch.long), obs, torch.zeros(4, 2, 5))
    torch.testing.assert_close(net.returns(inputs, 0.9), (net.score(inputs) * 0.9 ** torch.arange(5)).sum(-1))


def lit(rng: np.random.Generator, lead: tuple[int, ...]) -> np.ndarray:
    """Frames whose rewarded cells (channel 0, left half) and all other cells are lit at independent rates."""
    rates = np.broadcast_to(rng.random((*lead[:-1], 1, 1, 1, 1)) * 0.5, (*lead[:-1], 1, *GRID.shape)).copy()
    rates[..., 0, :, :5] = rng.random((*lead[:-1], 1, 1, 1)) * 0.5
    return (rng.random((*lead, *GRID.shape)) < rates).astype(np.uint8)


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_learns_a_reward_drawn_in_pixels_and_leaves_training_mode(precision):
    """The true reward is how many cells of channel 0 are lit in the frame's left half."""
    rng = np.random.default_rng(0)
    n, length = 300, 4
    frames = lit(rng, (n, 2, length + 1))
    rews = frames[:, :, :-1, 0, :, :5].sum((-1, -2)).astype(np.float32)
    returns = rews.sum(-1)
    pairs = FragmentPairs(frames=frames, acts=np.zeros((n, 2, length), np.int64),
                          dones=np.zeros((n, 2, length), bool), rews=rews, episode=np.zeros((n, 2), np.int64),
                          start=np.zeros((n, 2), np.int64), quality=returns.astype(np.float64))
    dataset = PreferenceDataset()
    dataset.push(pairs, (returns[:, 0] > returns[:, 1]).astype(np.float32), np.arange(n))
    torch.manual_seed(0)
    net = CnnRewardNet(GRID, ACTIONS, members=2, dropout=0.1, precision=precision)
    metrics = RewardTrainer(net, rng, epochs=15, lr=3e-3).train(dataset)
    assert metrics["reward_accuracy"] > 0.9
    assert not net.training  # dropout and batch norm are off wherever the net scores outside training
    test = torch.as_tensor(lit(rng, (200, 1))[:, 0])
    true = test[:, 0, :, :5].sum((-1, -2)).float()
    with torch.no_grad():
        learned = net(test, torch.zeros(200, dtype=torch.long), test, torch.zeros(200)).mean(0)
    assert np.corrcoef(learned.numpy(), true.numpy())[0, 1] > 0.9


def test_bfloat16_runs_the_layers_in_bfloat16_and_hands_on_float32_close_to_float32s():
    """The same weights under bfloat16 autocast: the convolution stack's first and last layers put out bfloat16,
    the features and the fragments' returns are float32 and within bfloat16's rounding of float32's."""
    torch.manual_seed(0)
    exact = CnnRewardNet(GRID, ACTIONS, members=3, use_action=True)
    fast = CnnRewardNet(GRID, ACTIONS, members=3, use_action=True, precision="bfloat16")
    fast.load_state_dict(exact.state_dict())
    seen = []
    for layer in (fast.body.convs[0], fast.body.convs[-1]):
        layer.register_forward_hook(lambda _module, _args, out: seen.append(out.dtype))
    obs, acts = frames((8, 2, 5, *GRID.shape)), torch.as_tensor(np.random.default_rng(1).integers(0, 3, (8, 2, 5)))
    inputs = [net.encode(obs, acts, obs, torch.zeros(8, 2, 5)) for net in (exact, fast)]
    with torch.no_grad():
        want, got = (net.returns(x, 0.99) for net, x in zip((exact, fast), inputs, strict=True))
    assert seen == [torch.bfloat16, torch.bfloat16] and got.dtype == torch.float32
    assert fast.body.features(inputs[1].x.reshape(1, -1, inputs[1].x.shape[-1])).dtype == torch.float32
    assert not torch.equal(got, want)  # it did run in lower precision
    torch.testing.assert_close(got, want, rtol=0.03, atol=0.03 * want.abs().max().item())


def test_atari_frames_get_the_papers_four_convolutions():
    net = CnnRewardNet(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), ACTIONS)
    convs = [layer for layer in net.body.convs if isinstance(layer, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size[0], c.stride[0]) for c in convs] == [(16, 7, 3), (16, 5, 2), (16, 3, 1),
                                                                                (16, 3, 1)]
    assert net.body.dense.in_dim == 16 * 7 * 7


@pytest.mark.parametrize(("space", "convs", "says"), [
    (gym.spaces.Box(-1, 1, (4,), np.float32), "auto", "image observations"),
    (GRID, [[16, 11, 1]], "shrink a 10x10 frame to nothing; use smaller kernels or strides"),
    (gym.spaces.Box(0, 1, (4, 10, 12), np.uint8), [[16, 11, 1]], "shrink a 10x12 frame"),
    (GRID, [[16, 3]], "[filters, kernel, stride]"),
    (GRID, [], "non-empty"),
    (GRID, [[0, 3, 1]], "[1, 4096]"),
])
def test_shapes_it_cannot_use_are_refused_by_key(space, convs, says):
    with pytest.raises(ArgumentError) as err:
        CnnRewardNet(space, ACTIONS, convs=convs)
    assert err.value.argument == "convs" and says in err.value.problem


@pytest.mark.parametrize(("option", "bad", "says"), [
    ("dense", 0, "[1, 65536], got 0"), ("dense", 65_537, "[1, 65536], got 65537"),
    ("dropout", 1.0, "[0, 1), got 1.0"), ("dropout", -0.1, "[0, 1), got -0.1"),
    ("convs", [[16, 1, 4097]], "[1, 4096]"),
    ("precision", "float16", "must be one of float32, bfloat16, got 'float16'"),
])
def test_bad_widths_and_rates_are_refused_by_key(option, bad, says):
    with pytest.raises(ArgumentError) as err:
        CnnRewardNet(GRID, ACTIONS, **{option: bad})
    assert err.value.argument == option and says in err.value.problem


def test_the_defaults_are_the_papers_and_every_option_reaches_the_net():
    paper = CnnRewardNet(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), ACTIONS)
    assert paper.body.dense.first_weight.shape[-1] == 64 and paper.input_norm is None and paper.std_coef == 0
    assert paper.potential is None and paper.input_clip is None and paper.norm is not None
    assert CnnRewardNet(GRID, ACTIONS, normalize_output=False).norm is None
    widest = CnnRewardNet(GRID, ACTIONS, dense=65_536, convs=[[1, 10, 1]])  # a 1x1 map keeps the widest dense small
    assert widest.body.dense.first_weight.shape[-1] == 65_536
    assert any(isinstance(layer, torch.nn.BatchNorm2d) for layer in paper.body.convs)
    assert [layer.p for layer in paper.body.convs if isinstance(layer, Dropout)] == [0.5] * 4
    net = CnnRewardNet(GRID, ACTIONS, dense=1, dropout=0.0, batch_norm=False, shaping_gamma=0.9, input_clip=5.0,
                       normalize_input=True, std_coef=0.5, convs=[[4096, 1, 1]],  # the bounds are allowed
                       use_next_state=True)
    assert net.body.image_shape[0] == 2 * GRID.shape[0]  # the observation and the next, channels side by side
    obs = frames((3, 2, *GRID.shape))
    assert torch.isfinite(net(obs, torch.zeros(3, 2, dtype=torch.long), obs, torch.zeros(3, 2))).all()
    assert [type(layer) for layer in net.body.convs] == [torch.nn.Conv2d, torch.nn.LeakyReLU]
    assert net.body.dense.first_weight.shape[-1] == 1 and net.body.convs[0].out_channels == 4096
    assert isinstance(net.potential.convs[0], torch.nn.Conv2d)  # shaping's potential is a CNN on the frames too
    assert net.input_norm is not None and net.input_clip == 5.0 and net.std_coef == 0.5


@pytest.mark.parametrize(("shape", "convs"), [((4, 43, 43), 4), ((4, 42, 84), 1), ((4, 84, 42), 1)])
def test_auto_gives_the_atari_stack_from_43_pixels_on_the_narrower_side(shape, convs):
    net = CnnRewardNet(gym.spaces.Box(0, 255, shape, np.uint8), ACTIONS)
    assert sum(isinstance(layer, torch.nn.Conv2d) for layer in net.body.convs) == convs


def test_a_dqn_on_minatar_frames_has_its_image_replay_buffer_relabelled_in_chunks(monkeypatch):
    pytest.importorskip("minatar")
    env = MinAtarEnv("Breakout", n_envs=2)
    net = CnnRewardNet(*env.spaces(), members=2, use_action=True)
    per_row = 2 * env.n_envs * int(np.prod(env.observation_space.shape)) * 4
    monkeypatch.setattr(agent_module, "RELABEL_BYTES", 3 * per_row)  # three buffer rows a pass
    dqn = functools.partial(DQN, "CnnPolicy", device="cpu", learning_starts=50, train_freq=4, buffer_size=200,
                            policy_kwargs={"features_extractor_class": SmallGridCNN, "normalize_images": False})
    source = AgentTrainer(dqn, env, net, seed=0, rng=np.random.default_rng(0))
    source.train(300)  # the buffer wraps around (150 steps of 2 copies)
    buffer = source.algorithm.replay_buffer
    assert buffer.full and buffer.observations.dtype == np.uint8  # an image buffer, frames as bytes
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))  # a reward update
    stale = buffer.rewards.copy()
    source.train(0)  # relabels first
    for i in range(0, buffer.buffer_size, 13):  # each transition scored alone, as the agent would now be paid
        for copy in range(buffer.n_envs):
            done = np.array([bool(buffer.dones[i, copy]) and not bool(buffer.timeouts[i, copy])])
            want = net.agent_reward(buffer.observations[i, copy][None], buffer.actions[i, copy],
                                    buffer.next_observations[i, copy][None], done, update_stats=False)[0]
            # float32 convolutions of a batch and of one frame sum in different orders
            assert buffer.rewards[i, copy] == pytest.approx(want, rel=1e-4, abs=1e-4)
    assert not np.allclose(stale, buffer.rewards, rtol=1e-2)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_zeroes_its_share_scales_the_rest_and_draws_from_torchs_generator(p):
    layer, x = Dropout(p), torch.full((200_000,), 2.0, requires_grad=True)
    torch.manual_seed(0)
    out = layer(x)
    zeroed = (out == 0).float().mean().item()
    assert abs(zeroed - p) < 0.005  # 200,000 draws: the share's standard error is under 0.0012
    torch.testing.assert_close(out[out != 0], torch.full_like(out[out != 0], 2.0 / (1 - p)))
    out.sum().backward()  # the gradient passes where the value did, scaled alike
    torch.testing.assert_close(x.grad, (out.detach() != 0).float() / (1 - p))
    torch.manual_seed(0)
    torch.testing.assert_close(layer(x), out)  # a seed gives the mask back: exact resume restores torch's state
    assert layer.eval()(x) is x


def test_dropout_draws_its_masks_from_the_generator_it_is_given_and_leaves_torchs_own_alone():
    net = CnnRewardNet(*MinAtarEnv("Breakout").spaces(), members=2, dropout=0.5).train()
    x = torch.rand(1, 8, net.body.image_dim)
    masks = []
    for seed in (0, 0, 1):
        torch.manual_seed(123)
        with masks_drawn_from(net, torch.Generator().manual_seed(seed)):
            masks.append(net.body(x))
        assert torch.equal(torch.rand(3), torch.manual_seed(123) and torch.rand(3))  # torch's own drew nothing
    assert torch.equal(masks[0], masks[1]) and not torch.equal(masks[0], masks[2])
    assert all(layer.generator is None for layer in net.modules() if isinstance(layer, Dropout))  # then torch's own
