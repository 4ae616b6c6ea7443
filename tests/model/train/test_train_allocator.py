"""The CUDA caching allocator replayed (archlint.model.train.allocator) and attention as CUDA keeps it."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from archlint.devices import resolve
from archlint.model.train.allocator import LARGE_BUFFER, SMALL_BUFFER, Allocator, replay
from archlint.model.train.memory import step_memory

MiB = 1 << 20
INF = math.inf


def test_small_requests_share_a_two_mib_segment_and_round_to_512():
    a = replay([(0, INF, 100), (1, INF, 600_000), (2, INF, 600_000)])
    assert a.reserved == SMALL_BUFFER and a.allocated == 512 + 2 * 600_064


def test_a_freed_hole_too_small_for_a_later_request_costs_a_new_segment():
    # 8 MiB twice from one 20 MiB segment, the first freed: its 8 MiB hole cannot hold 12 MiB, so a
    # 12 MiB segment is added although 12 MiB are free in the first (as PyTorch does)
    a = replay([(0, 2, 8 * MiB), (1, INF, 8 * MiB), (3, INF, 12 * MiB)])
    assert a.peak_reserved == LARGE_BUFFER + 12 * MiB
    assert a.peak_allocated == 20 * MiB


def test_freed_neighbours_merge_and_are_reused():
    a = replay([(0, 3, 6 * MiB), (1, 4, 6 * MiB), (5, INF, 12 * MiB)])
    assert a.peak_reserved == LARGE_BUFFER  # the two freed 6 MiB blocks merged with the rest


def test_a_remainder_of_one_mib_or_less_stays_in_the_large_block():
    a = replay([(0, INF, 19 * MiB + MiB // 2)])  # ≥ 10 MiB: its own segment, 20 MiB; 0.5 MiB left unsplit
    assert a.allocated == 20 * MiB


def test_under_a_limit_free_segments_are_released_before_running_out():
    a = Allocator(limit=40 * MiB)
    b1 = a.malloc(20 * MiB)
    a.free(b1)  # cached, not returned
    assert a.reserved == 20 * MiB
    a.malloc(30 * MiB)  # 20 + 30 > 40: the free segment is released, then it fits
    assert a.reserved == 30 * MiB and not a.out_of_memory
    assert a.malloc(12 * MiB) is None and a.out_of_memory


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(32, 96)

    def forward(self, x):
        q, k, v = self.qkv(x).view(x.shape[0], x.shape[1], 3, 2, 16).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v).sum()


def test_on_a_gpu_spec_attention_keeps_what_the_fused_kernels_keep():
    # 512 tokens, 2 heads: the math form keeps the 8×2×512×512 float32 weights (16.8 MB) for
    # backward; CUDA's fused kernels keep a log-sum-exp, and so does the CPU's flash kernel
    # (model/train/cpu_attention: what PyTorch picks on a CPU)
    x = torch.randn(8, 512, 32)
    cpu = step_memory(Attention(), (x,), optimizer="sgd")
    gpu = step_memory(Attention(), (x,), optimizer="sgd", device_spec=resolve("h100-sxm"))
    weights = 8 * 2 * 512 * 512 * 4
    assert gpu["activations_bytes"] < weights / 4 and cpu["activations_bytes"] < weights / 4
    assert gpu["allocator"]["reserved_peak_bytes"] >= gpu["allocator"]["reserved_at_peak_bytes_lower_bound"]
    assert gpu["device_peak_bytes"] == gpu["allocator"]["reserved_peak_bytes"] + gpu["allocator"]["cuda_context_bytes"]


def test_multihead_attention_is_seen_too():
    # nn.MultiheadAttention reaches SDPA inside F.multi_head_attention_forward (torchvision's ViT)
    mha = nn.MultiheadAttention(32, 2, batch_first=True)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x):
            return self.mha(x, x, x, need_weights=False)[0].sum()

    x = torch.randn(8, 512, 32)
    cpu = step_memory(Net(), (x,), optimizer="sgd")
    gpu = step_memory(Net(), (x,), optimizer="sgd", device_spec=resolve("h100-sxm"))
    weights = 8 * 2 * 512 * 512 * 4
    assert gpu["activations_bytes"] < weights / 4 and cpu["activations_bytes"] < weights / 4
    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention  # restored


def _random_step(rng, events: int, workspace_share: float, longest: int, smallest: int, largest: int):
    """(storages, workspaces) as (born, died, bytes): one born an event, freed within `longest` events or never."""
    storages, workspaces = [], []
    for born in range(events):
        died = rng.choice([INF, born + rng.randint(1, longest)])
        (workspaces if rng.random() < workspace_share else storages).append(
            (born, died, rng.randint(smallest, largest))
        )
    return storages, workspaces


def test_a_limit_the_unlimited_replay_never_reaches_changes_nothing():
    # what lets the memory model skip the limited replays (max_batch's evaluations, three each)
    # where the unlimited replay's reserved peak is within the limit: the same peaks, no skip
    import random

    from archlint.model.train.allocator import requests
    from archlint.model.train.memory import _limited

    rng = random.Random(0)
    for _ in range(30):
        storages, workspaces = _random_step(rng, 60, 0.1, 20, 1, 40 * MiB)
        unlimited = replay(storages, workspaces=workspaces)
        for limit in (unlimited.peak_reserved, unlimited.peak_reserved + 1, 2 * unlimited.peak_reserved):
            run = replay(storages, limit=limit, workspaces=workspaces)
            assert (run.out_of_memory, run.peak_reserved, run.skipped) == (
                False,
                unlimited.peak_reserved,
                unlimited.skipped,
            )
            made = requests(storages, workspaces)
            assert _limited(made, limit, unlimited) == _limited(made, limit)
        below = unlimited.peak_reserved - 1  # under it the replay is run: it may release, skip or run out
        assert _limited(made, below, unlimited) == _limited(made, below)


def test_requests_made_once_replay_as_the_storages_do():
    """step_memory makes a step's requests once for its replays under each limit (allocator.requests)."""
    import random

    from archlint.model.train.allocator import replay_requests, requests

    rng = random.Random(1)
    for _ in range(20):
        storages, workspaces = _random_step(rng, 80, 0.15, 30, 0, 30 * MiB)
        made = requests(storages, workspaces)
        for limit in (None, 40 * MiB, 200 * MiB):
            a, b = replay(storages, limit=limit, workspaces=workspaces), replay_requests(made, limit)
            assert (a.out_of_memory, a.peak_reserved, a.peak_allocated, a.skipped) == (
                b.out_of_memory,
                b.peak_reserved,
                b.peak_allocated,
                b.skipped,
            )
