"""The bodies of reward nets: ``members`` independent networks with scalar output, evaluated together."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
from torch import nn

from rlhp.errors import ArgumentError


class BatchedMLP(nn.Module):
    """``members`` independent MLPs with scalar output, evaluated together; hidden layers are ReLU, or leaky
    ReLU with ``negative_slope``."""

    def __init__(self, members: int, in_dim: int, hidden_sizes: list[int], negative_slope: float = 0.0) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        sizes = [in_dim, *hidden_sizes, 1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = 1 / math.sqrt(fan_in)  # nn.Linear's default init, per member
            self.weights.append(nn.Parameter(torch.empty(members, fan_in, fan_out).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.empty(members, 1, fan_out).uniform_(-bound, bound)))
        # The same Parameter objects as plain tuples, read on every call: ParameterList's own indexing and
        # iterator parse a string index per item (8% of training on CartPole-sized batches). Moving the
        # module (``.to``) or loading a state dict changes these tensors in place, so the tuples stay valid.
        self.hidden = tuple(zip(self.weights[:-1], self.biases[:-1]))
        self.output = (self.weights[-1], self.biases[-1])

    @property
    def first_weight(self) -> torch.Tensor:
        """The input layer's weights, (members, in_dim, width)."""
        return self.hidden[0][0] if self.hidden else self.output[0]

    @property
    def in_dim(self) -> int:
        """Width of the input."""
        return self.first_weight.shape[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(members or 1, N, in_dim) -> (members, N)."""
        return self.head(self.features(x))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The last hidden layer's activations: (members or 1, N, in_dim) -> (members, N, width)."""
        for i, (w, b) in enumerate(self.hidden):
            x = torch.baddbmm(b, x.expand(w.shape[0], -1, -1) if i == 0 else x, w)
            x = torch.relu_(x) if self.negative_slope == 0 else nn.functional.leaky_relu_(x, self.negative_slope)
        return x

    def head(self, h: torch.Tensor, bias_scale: float = 1.0) -> torch.Tensor:
        """The linear output layer, (members, N, width) -> (members, N), with its bias times
        ``bias_scale``: a weighted sum of rows' features then scores as the same sum of their outputs."""
        w_out, b_out = self.output
        if bias_scale != 1.0:
            b_out = b_out * bias_scale
        if w_out.shape[0] == 1:
            return torch.baddbmm(b_out, h, w_out).squeeze(-1)
        # Several members: CPU bmm is slow at batched matrix-vector products (the output layer's
        # backward took 40% longer than as dot products), so they are dot products here.
        return torch.linalg.vecdot(h, w_out.transpose(1, 2)) + b_out.squeeze(-1)


class Dropout(nn.Module):
    """Dropout whose mask comes from uniform draws: torch's own (Bernoulli draws) is 2-3x slower on a CPU, where
    it took half of a CNN reward model's training time; the same distribution, from torch's generator."""

    generator: torch.Generator | None = None
    """Where the masks are drawn from; torch's default generator unless :func:`masks_drawn_from` says another."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` with each element zeroed with probability p and the rest scaled by 1 / (1 - p), in train mode."""
        if not self.training:
            return x
        draws = torch.rand(x.shape, generator=self.generator, dtype=x.dtype, device=x.device)
        return x * (draws >= self.p).to(x.dtype).mul_(1 / (1 - self.p))


@contextlib.contextmanager
def masks_drawn_from(module: nn.Module, generator: torch.Generator) -> Iterator[None]:
    """Inside, every :class:`Dropout` in ``module`` draws its masks from ``generator``: a reward model trained in a
    second thread must not draw from torch's default generator while the agent's thread draws its actions there,
    or the order of their draws, and so the run, would differ from one run to the next."""
    dropouts = [m for m in module.modules() if isinstance(m, Dropout)]
    for dropout in dropouts:
        dropout.generator = generator
    try:
        yield
    finally:
        for dropout in dropouts:
            del dropout.generator  # back to the class's default


class BatchedCNN(nn.Module):
    """``members`` independent CNNs over image inputs, then a dense layer and a scalar output, evaluated together.

    Each convolution of all members is one grouped convolution (``groups=members``) over the members'
    channels side by side, so an ensemble is one pass, as :class:`BatchedMLP`'s is. An input row is the
    flat images (``images`` frames of ``frame_shape``, stacked along channels) followed by any flat extras
    (actions, done), which join the convolutions' output at the dense layer. Every convolution is followed by
    batch norm (optional), leaky ReLU and dropout, as in Christiano et al. (2017)'s Atari reward model. With
    ``precision="bfloat16"`` the convolutions and the dense layer run under bfloat16 autocast (the weights stay
    float32) and hand on float32 features, so fragments' sums and the loss keep float32's accuracy.
    """

    PRECISIONS = ("float32", "bfloat16")

    def __init__(self, members: int, in_dim: int, frame_shape: tuple[int, int, int], images: int,
                 convs: list[list[int]], dense: int, dropout: float, batch_norm: bool,
                 precision: str = "float32", negative_slope: float = 0.01) -> None:
        super().__init__()
        if precision not in self.PRECISIONS:
            raise ArgumentError("precision", f"must be one of {', '.join(self.PRECISIONS)}, got {precision!r}")
        self.precision = precision
        channels, height, width = frame_shape
        self.members = members
        self.image_shape = (images * channels, height, width)
        self.image_dim = math.prod(self.image_shape)
        layers: list[nn.Module] = []
        depth = images * channels
        for filters, kernel, stride in convs:
            layers.append(nn.Conv2d(members * depth, members * filters, kernel, stride, groups=members))
            if batch_norm:
                layers.append(nn.BatchNorm2d(members * filters))
            layers.append(nn.LeakyReLU(negative_slope, inplace=True))
            if dropout:
                layers.append(Dropout(dropout))
            depth, height, width = filters, (height - kernel) // stride + 1, (width - kernel) // stride + 1
            if min(height, width) < 1:
                raise ArgumentError("convs", f"{convs} shrink a {frame_shape[1]}x{frame_shape[2]} frame to nothing; "
                                    "use smaller kernels or strides")
        # Channels-last: the CPU's convolution and batch norm run 2.4x as fast on it as on (N, C, H, W).
        self.convs = nn.Sequential(*layers).to(memory_format=torch.channels_last)
        self.dense = BatchedMLP(members, depth * height * width + in_dim - self.image_dim, [dense], negative_slope)
        self._in_dim = in_dim

    @property
    def first_weight(self) -> torch.Tensor:
        """The first convolution's weights."""
        return self.convs[0].weight

    @property
    def in_dim(self) -> int:
        """Width of the flat input: the images, then the extras."""
        return self._in_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(members or 1, N, in_dim) -> (members, N)."""
        return self.head(self.features(x))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The dense layer's activations: (members or 1, N, in_dim) -> (members, N, dense)."""
        groups, n = x.shape[:2]
        images = x[..., :self.image_dim].reshape(groups, n, *self.image_shape)
        depth, height, width = self.image_shape
        # Members side by side along channels: every member sees the same images, or its own (bootstrap).
        images = (images[0].repeat(1, self.members, 1, 1) if groups == 1
                  else images.transpose(0, 1).reshape(n, groups * depth, height, width))
        with torch.autocast(x.device.type, torch.bfloat16, enabled=self.precision == "bfloat16"):
            h = self.convs(images.contiguous(memory_format=torch.channels_last))
            h = h.reshape(n, self.members, -1).transpose(0, 1)
            if x.shape[-1] > self.image_dim:
                h = torch.cat([h, x[..., self.image_dim:].expand(self.members, -1, -1).to(h.dtype)], dim=-1)
            return self.dense.features(h).float()

    def head(self, h: torch.Tensor, bias_scale: float = 1.0) -> torch.Tensor:
        """The linear output layer (see :meth:`BatchedMLP.head`)."""
        return self.dense.head(h, bias_scale)
