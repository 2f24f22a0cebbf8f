import torch
from helpers import random_pairs, spaces

from rlhp.rewards import RewardNet, RunningNorm


def per_member_reference(net: RewardNet, x: torch.Tensor, m: int) -> torch.Tensor:
    """The m-th member as a plain MLP, one layer at a time."""
    for i, (w, b) in enumerate(zip(net.mlp.weights, net.mlp.biases)):
        x = x @ w[m] + b[m, 0]
        if i < len(net.mlp.weights) - 1:
            x = torch.relu(x)
    return x.squeeze(-1)


def test_ensemble_in_one_op_equals_each_member_alone():
    net = RewardNet(*spaces(), members=4, use_action=True)
    pairs = random_pairs(7, length=5)
    out = net(*pairs.tensors())
    assert out.shape == (4, 7, 2, 5)
    obs = torch.as_tensor(pairs.obs).reshape(-1, 3)
    acts = torch.nn.functional.one_hot(torch.as_tensor(pairs.acts).reshape(-1), 2).float()
    x = torch.cat([obs, acts], dim=-1).clamp(-5, 5)
    for m in range(4):
        torch.testing.assert_close(out[m].reshape(-1), per_member_reference(net, x, m))


def test_per_member_inputs_score_each_member_on_its_own_rows():
    net = RewardNet(*spaces(), members=3)
    pairs = random_pairs(6, length=4)
    idx = torch.tensor([[0, 1], [2, 3], [4, 5]])
    out = net(*(t[idx] for t in pairs.tensors()), per_member=True)
    full = net(*pairs.tensors())
    assert out.shape == (3, 2, 2, 4)
    for m in range(3):
        torch.testing.assert_close(out[m], full[m, idx[m]])


def test_shaping_adds_gamma_next_potential_minus_potential():
    net = RewardNet(*spaces(), shaping_gamma=0.9, input_clip=None)
    pairs = random_pairs(3, length=4)
    pairs.dones[:, :, -1] = True
    shaped = net(*pairs.tensors())
    potential, net.potential = net.potential, None
    base = net(*pairs.tensors())
    phi = potential(torch.as_tensor(pairs.obs).reshape(1, -1, 3)).reshape(pairs.dones.shape)
    next_phi = potential(torch.as_tensor(pairs.next_obs).reshape(1, -1, 3)).reshape(pairs.dones.shape)
    not_done = 1 - torch.as_tensor(pairs.dones).float()
    torch.testing.assert_close(shaped - base, (0.9 * next_phi * not_done - phi)[None])


def test_agent_reward_adds_std_bonus():
    net = RewardNet(*spaces(), members=5, std_coef=2.0, normalize_output=False)
    pairs = random_pairs(4, length=3)
    rew = net(*pairs.tensors())
    expected = rew.mean(0) + 2.0 * rew.std(0)
    got = net.agent_reward(pairs.obs, pairs.acts, pairs.next_obs, pairs.dones)
    torch.testing.assert_close(torch.as_tensor(got), expected)


def test_running_norm_matches_whole_batch_statistics():
    norm, x = RunningNorm((3,)), torch.randn(1000, 3) * torch.tensor([1.0, 5.0, 0.1]) + 2
    for chunk in x.split(77):
        with torch.inference_mode():
            norm(chunk, update=True)
    torch.testing.assert_close(norm.mean, x.mean(0))
    torch.testing.assert_close(norm.var, x.var(0, unbiased=False))
    torch.testing.assert_close(norm(x), (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + 1e-5))
