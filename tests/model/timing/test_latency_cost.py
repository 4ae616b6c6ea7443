"""Issue 25 item 6: what --latency costs. Fix pricing stops by a sequential rule instead of
repeating pairs while the difference is inside the noise; the whole run has a time budget that
the report mentions when it cut timing short; a saving inside the noise reads "could not
measure (noise N%)"; every stage is labelled in the progress display. No timed test: fake
timings and a fake clock."""

from __future__ import annotations

import itertools
import random
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from archlint.diagnostics import Diagnostic, Price
from archlint.model.speedups import fix_timing
from archlint.model.timing.budget import Budget
from archlint.model.timing.paired import WithinNoise, judge
from archlint.model.timing.timer import MIN_PASSES, Sampled, Stats, make_timer, sample
from archlint.report.wording import price_bits


def noisy(n, centre, spread, seed):
    rng = random.Random(seed)
    return [centre + rng.uniform(-spread, spread) for _ in range(n)]


# The sequential rule -------------------------------------------------------------------------------


def test_a_clear_saving_is_measured_at_the_first_look():
    v = judge(noisy(8, 10.0, 0.1, 1), noisy(8, 8.0, 0.1, 2), floor_ms=0.1, max_pairs=50)
    assert v.done and v.why == "measured" and v.saving_ms == pytest.approx(2.0, abs=0.15)
    assert not isinstance(v.saving_ms, WithinNoise)


def test_a_difference_inside_wide_noise_asks_for_more_pairs_then_gives_up_at_the_cap():
    before, after = noisy(50, 10.0, 3.0, 3), noisy(50, 10.0, 3.0, 4)
    early = judge(before[:8], after[:8], floor_ms=0.1, max_pairs=50)
    assert not early.done  # undecided: the noise is far wider than the floor
    last = judge(before, after, floor_ms=0.1, max_pairs=50)
    assert last.done and last.why == "cap" and isinstance(last.saving_ms, WithinNoise)
    assert last.saving_ms == 0 and last.saving_ms.noise > 0.5


def test_noise_far_under_the_floor_stops_early():
    # ±0.05 ms of noise on a model whose 1% floor is 1 ms: whatever the saving is, it cannot pay
    v = judge(noisy(8, 100.0, 0.05, 5), noisy(8, 100.0, 0.05, 6), floor_ms=1.0, max_pairs=50)
    assert v.done and v.why == "below floor" and v.pairs == 8


def test_the_budget_running_out_decides_now():
    v = judge(noisy(8, 10.0, 3.0, 7), noisy(8, 10.0, 3.0, 8), floor_ms=0.01, max_pairs=50, last=True)
    assert v.done and isinstance(v.saving_ms, WithinNoise)


# Fix pricing: how many pairs it times ----------------------------------------------------------------


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x))


def priced(monkeypatch, before_ms, after_ms, repeat=50, budget=None):
    """fix_timing.saving_ms with the timer faked: each pass of the base model takes the next of
    `before_ms`, each of the fixed one the next of `after_ms`. Returns (saving, pairs timed)."""
    feeds = [iter(before_ms), iter(after_ms)]
    timed = []

    def fake_sample(runs, timer, warmup, repeat, alternate=False, label="", deadline=None, **_):
        passes = [tuple(next(f) for _ in range(repeat)) for f in feeds]
        timed.append(repeat)
        return [Sampled({}, Stats.of(list(p)), p) for p in passes]

    monkeypatch.setattr(fix_timing, "sample", fake_sample)
    model = Net().eval()
    pricer = SimpleNamespace(
        model=model,
        device=torch.device("cpu"),
        args=(torch.randn(1, 3, 8, 8),),
        kwargs={},
        warmup=10,
        repeat=repeat,
        end_to_end_ms=10.0,
        budget=budget or Budget(None),
    )
    saving = fix_timing.saving_ms(pricer, fix_timing.fold_norms, (("conv", "bn"),))
    return saving, sum(timed)


def test_a_clear_saving_costs_one_batch_of_pairs(monkeypatch):
    saving, pairs = priced(monkeypatch, noisy(200, 10.0, 0.1, 1), noisy(200, 8.0, 0.1, 2))
    assert saving == pytest.approx(2.0, abs=0.15)
    assert pairs == fix_timing.BATCH  # was: 50 pairs (--repeat) at least


def test_pure_noise_never_times_more_than_repeat_pairs(monkeypatch):
    saving, pairs = priced(monkeypatch, noisy(500, 10.0, 3.0, 3), noisy(500, 10.0, 3.0, 4))
    assert isinstance(saving, WithinNoise) and saving.noise > 0
    assert pairs <= 50  # was: 150 (three rounds of --repeat while inside the noise)


def test_a_spent_budget_stops_pricing_and_says_so(monkeypatch):
    budget = Budget(1.0, clock=itertools.count(0.0, 10.0).__next__)  # every reading 10 s later: spent at once
    saving, pairs = priced(monkeypatch, noisy(500, 10.0, 3.0, 3), noisy(500, 10.0, 3.0, 4), budget=budget)
    assert pairs == fix_timing.BATCH and isinstance(saving, WithinNoise)
    assert budget.notes() and "--latency-budget 1 s reached" in budget.notes()[0]


# The budget inside sample() ---------------------------------------------------------------------------


def test_sample_stops_at_the_deadline_after_min_passes():
    calls = []
    timer = make_timer("cpu")

    def run():
        with timer.region("x"):
            calls.append(1)

    (s,) = sample([run], timer, warmup=0, repeat=100, deadline=3.0, clock=itertools.count(100.0).__next__)
    assert s.per_pass.n == MIN_PASSES  # past the deadline from the start, but never fewer than MIN_PASSES
    (s,) = sample([run], timer, warmup=0, repeat=100, deadline=3.0, clock=itertools.count(0.0).__next__)
    assert s.per_pass.n == MIN_PASSES + 3  # the clock is read from then on: 0, 1, 2, then 3 is past
    (s,) = sample([run], timer, warmup=0, repeat=100)
    assert s.per_pass.n == 100  # no deadline: every pass


def test_alternating_samples_stop_on_an_even_pass():
    timer = make_timer("cpu")
    now = itertools.count(0.0, 1.0)

    def run():
        with timer.region("x"):
            pass

    a, b = sample([run, run], timer, warmup=0, repeat=100, alternate=True, deadline=1.0, clock=now.__next__)
    assert a.per_pass.n == b.per_pass.n and a.per_pass.n % 2 == 0


# What the report says --------------------------------------------------------------------------------


def test_a_saving_inside_the_noise_reads_could_not_measure():
    price = Price.timed("the BN folded", saving_ms=WithinNoise(0.4), model_ms=10.0, device="cpu")
    text = "; ".join(price_bits(Diagnostic("AL205", "m", price=price)))
    assert "could not measure (noise 4.0% of model time, measured on cpu)" in text
    assert "no faster" not in text and price.to_dict()["noise_share"] == pytest.approx(0.04)
    measured = Price.timed("the BN folded", saving_ms=-0.3, model_ms=10.0)  # a measured loss stays one
    assert "alternative no faster (-0.3 ms" in "; ".join(price_bits(Diagnostic("AL205", "m", price=measured)))


def test_latency_budget_option_and_its_cap_by_timeout(tmp_path, capsys):
    from archlint.api import settings_for
    from archlint.cli import main
    from archlint.model.timing.budget import seconds

    s = settings_for(latency_budget=7.5)
    assert s.latency_budget == 7.5 and seconds(s) == 7.5
    s.timeout = 5
    assert seconds(s) == 4.0  # the budget ends before --timeout would
    assert main(["m.py:Net", "--latency-budget", "0"]) == 2
    assert "--latency-budget must be a number > 0" in capsys.readouterr().err
