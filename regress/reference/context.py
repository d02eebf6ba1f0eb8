"""The reference model's context state: the recurrence across positions and its read-out.

What the DSA layer attends enters a state ``z[p] = (1 - c) g a[p] + N z[p-1]`` with
``N = c (I + lag S)``, ``S`` feeding the state's second half into its first (``S @ S = 0``); the
head reads ``L[p] + G R_p z[p]`` through a rotary (position-dependent) rotation. ``z`` is the hidden
state the target hands its MTP layer and each draft step recycles; why this makes a stale map's
damage compound with depth is in ``benchmarks/reference_engine.md``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from regress.reference.model import ModelConfig


def rotary(cfg: ModelConfig, z: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``R_p z``: rotate coordinate pairs of ``z`` by angles growing with the position."""
    import torch

    half = z.shape[-1] // 2
    i = torch.arange(half, dtype=torch.float64, device=z.device)
    angle = positions.to(torch.float64).unsqueeze(-1) * cfg.readout_base ** (-i / half)
    cos, sin = torch.cos(angle), torch.sin(angle)
    a, b = z[..., :half], z[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


@functools.lru_cache(maxsize=64)
def _decay(carry: float, n: int, device: str) -> tuple[torch.Tensor, ...]:
    """One segment's recurrence: ``carry**lag`` and ``lag * carry**lag`` (``lag = i - j >= 0``),
    and the carry-in weights ``carry**(i+1)`` and ``(i+1) * carry**(i+1)``."""
    import torch

    i = torch.arange(n, dtype=torch.float64)
    lag = i.unsqueeze(1) - i.unsqueeze(0)
    power = torch.where(lag >= 0, carry ** lag.clamp(min=0), torch.zeros_like(lag))
    steps = (carry ** (i + 1)).unsqueeze(1)
    out = (power, lag.clamp(min=0) * power, steps, (i + 1).unsqueeze(1) * steps)
    return tuple(t.to(device) for t in out)


def _lagged(z: torch.Tensor) -> torch.Tensor:
    """``S z``: the state's second half fed into its first half (``S @ S = 0``)."""
    import torch

    half = z.shape[-1] // 2
    return torch.cat([z[..., half:], torch.zeros_like(z[..., half:])], dim=-1)


def carry_state(cfg: ModelConfig, prev: torch.Tensor) -> torch.Tensor:
    """``N z`` with ``N = c (I + lag S)``: what a position keeps of the state before it."""
    return cfg.context_carry * (prev + cfg.context_lag * _lagged(prev))


def context_states(
    cfg: ModelConfig, attended: torch.Tensor, seq_lens: list[int], carry_in: torch.Tensor
) -> torch.Tensor:
    """Run the context recurrence ``z[p] = (1-c) g a[p] + N z[p-1]`` over each request's tokens.

    ``N**k = c**k (I + k lag S)`` since ``S @ S = 0``, so a segment is four matrix products.
    Each request's segment is computed on its own, so a token's state never depends on who
    shares the batch.
    """
    import torch

    fresh = (1.0 - cfg.context_carry) * cfg.attn_gain * attended
    out, offset = [], 0
    for i, n in enumerate(seq_lens):
        if n:
            # Cache the short verify/draft chunks; a prompt's matrices are built once and dropped.
            build = _decay if n <= 32 else _decay.__wrapped__
            power, aged, steps, aged_steps = build(cfg.context_carry, n, str(fresh.device))
            seg, z_in = fresh[offset : offset + n], carry_in[i]
            z = power @ seg + steps * z_in
            if cfg.context_lag:
                z = z + cfg.context_lag * _lagged(aged @ seg + aged_steps * z_in)
            out.append(z)
        offset += n
    return torch.cat(out) if out else fresh
