"""A reward net on image observations: convolutions over the frame (stack), as in Christiano et al. (2017)."""

from __future__ import annotations

import gymnasium as gym

from rlhp.errors import ArgumentError
from rlhp.rewards.bodies import BatchedCNN
from rlhp.rewards.net import RewardNet

ATARI_CONVS = [[16, 7, 3], [16, 5, 2], [16, 3, 1], [16, 3, 1]]
"""The paper's Atari reward model: four convolutions of 16 filters, [filters, kernel, stride] each."""

SMALL_CONVS = [[16, 3, 1]]
"""One 3x3 convolution for small frames such as MinAtar's 10x10 (as in MinAtar's own DQN)."""

SMALL_FRAME = 43
"""Frames narrower than this get :data:`SMALL_CONVS` under ``convs=auto``: the Atari stack shrinks 43 pixels to one."""


class CnnRewardNet(RewardNet):
    """:class:`RewardNet` whose members are CNNs over image observations (channels, height, width).

    Args:
        convs: ``auto`` (the paper's Atari stack on frames of at least 43 pixels a side, else one 3x3
            convolution) or a list of [filters, kernel, stride].
        dense: width of the dense layer after the convolutions.
        dropout: dropout after every convolution (the paper's 0.5 against an over-fitting predictor).
        batch_norm: batch norm after every convolution.
        precision: ``float32``, or ``bfloat16`` to run the convolutions and the dense layer under bfloat16
            autocast, on a CPU with bfloat16 instructions or a GPU (the weights, the sums over fragments and
            the loss stay float32).
        (the rest as :class:`RewardNet`; the observations are the images, and actions or done, when used,
        join at the dense layer)
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, convs: str | list[list[int]] = "auto",
                 dense: int = 64, dropout: float = 0.5, batch_norm: bool = True, members: int = 1,
                 use_state: bool = True, use_action: bool = False, use_next_state: bool = False,
                 use_done: bool = False, shaping_gamma: float | None = None, normalize_input: bool = False,
                 input_clip: float | None = None, normalize_output: bool = True, std_coef: float = 0.0,
                 std_decay: float = 0.0, precision: str = "float32") -> None:
        shape = getattr(observation_space, "shape", None)
        if not isinstance(observation_space, gym.spaces.Box) or len(shape) != 3:
            raise ArgumentError("convs", f"need image observations (channels, height, width), but the env's are "
                                f"{observation_space}; use reward_net=basic or ensemble there")
        if convs == "auto":
            convs = ATARI_CONVS if min(shape[1:]) >= SMALL_FRAME else SMALL_CONVS
        self.convs = _checked(convs)
        if not 1 <= dense <= self.MAX_WIDTH:
            raise ArgumentError("dense", f"must lie in [1, {self.MAX_WIDTH}], got {dense}")
        if not 0 <= dropout < 1:
            raise ArgumentError("dropout", f"must lie in [0, 1), got {dropout}")
        self.dropout, self.batch_norm, self.precision = dropout, batch_norm, precision
        super().__init__(observation_space, action_space, [dense], members, use_state, use_action, use_next_state,
                         use_done, shaping_gamma, normalize_input, input_clip, normalize_output, std_coef,
                         std_decay)

    def make_body(self, in_dim: int, states: int) -> BatchedCNN:
        """The members' CNNs over ``states`` stacked observations, extras joining at the dense layer."""
        return BatchedCNN(self.members, in_dim, self.observation_space.shape, states, self.convs,
                          self.hidden_sizes[0], self.dropout, self.batch_norm, self.precision)


def _checked(convs: object) -> list[list[int]]:
    """``convs`` as [filters, kernel, stride] triples."""
    if not isinstance(convs, list | tuple) or not convs or not all(
            isinstance(c, list | tuple) and len(c) == 3 and all(isinstance(v, int) and not isinstance(v, bool)
                                                               and 1 <= v <= 4096 for v in c) for c in convs):
        raise ArgumentError("convs", f"must be auto or a non-empty list of [filters, kernel, stride], each in "
                            f"[1, 4096], got {convs!r}")
    return [list(c) for c in convs]
