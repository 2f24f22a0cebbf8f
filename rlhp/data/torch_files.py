"""Torch files written so that a full disk is an ``OSError`` naming the file, as any other write."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch


def save_torch(obj: Any, path: Path, **kwargs: Any) -> None:
    """``torch.save`` through memory: a full disk then raises OSError (ENOSPC), not torch's RuntimeError."""
    buffer = io.BytesIO()
    torch.save(obj, buffer, **kwargs)
    path.write_bytes(buffer.getbuffer())
