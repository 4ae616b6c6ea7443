"""Fit: max_batch from the memory model, confirmed; AL610 ways to fit, each priced."""

import pytest
import torch
import torch.nn as nn

from archlint import registry
from archlint.errors import UsageError
from archlint.model.checks.batch_does_not_fit import CODE, findings
from archlint.model.train.fit import fit_report, max_batch, with_batch
from archlint.model.train.memory import step_memory
from archlint.train_names import parse_size as parse_bytes


def tower():
    torch.manual_seed(0)
    block = lambda: nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 32))  # noqa: E731
    return nn.Sequential(*[block() for _ in range(4)])


X = torch.randn(64, 32)


def peak(model, batch, optimizer="adam"):
    args, kwargs = with_batch((X,), {}, batch)
    return step_memory(model, args, kwargs, optimizer=optimizer)["peak_bytes"]


def test_max_batch_fits_and_next_does_not():
    model = tower()
    budget = peak(model, 300)
    r = fit_report(model, (X,), {}, optimizer="adam", budget_bytes=budget)
    n = r["max_batch"]
    assert n >= 300
    assert peak(model, n) <= budget < peak(model, n + 1)
    assert len(r["max_batch_basis"]["evaluations"]) <= 8


def test_max_batch_grows_with_the_budget():
    model = tower()
    answers = [
        fit_report(model, (X,), {}, optimizer="sgd", budget_bytes=b)["max_batch"] for b in (400_000, 800_000, 1_600_000)
    ]
    assert answers == sorted(answers) and answers[0] < answers[-1]


def test_max_batch_on_a_piecewise_line():
    # The peak moves from one affine piece to a steeper one: the secant steps still land exactly.
    curve = lambda b: 1000 + 10 * b if b < 50 else 1500 + 40 * (b - 50)  # noqa: E731
    for budget in (1200, 1490, 1500, 5000, 123456):
        n = max_batch(curve, 2, budget)["max_batch"]
        assert curve(n) <= budget < curve(n + 1)


def test_does_not_fit_gives_priced_ways():
    model = tower()
    budget = peak(model, 64)  # batch 512 does not fit; 64 does
    r = fit_report(model, (torch.randn(512, 32),), {}, optimizer="adam", budget_bytes=budget)
    found = findings(model, (torch.randn(512, 32),), {}, r, optimizer="adam", loss="mean", device_spec=None)
    assert r["fits"] is False
    assert found and {d.code for d in found} == {CODE}
    kinds = " ".join(d.price.alternative for d in found)
    assert "checkpoint" in kinds and "split(" in kinds and "Adam8bit" in kinds
    for d in found:
        assert d.price.whole == "step peak memory"
        assert d.evidence["memory_saved_bytes"] > 0
    accumulate = next(d for d in found if "split(" in d.price.alternative)
    assert accumulate.evidence["fits_after"] and accumulate.evidence["micro_batch"] == r["max_batch"] >= 64
    ckpt = next(d for d in found if "checkpoint" in d.price.alternative)
    assert ckpt.price.flops_saved < 0  # recomputation is time added
    from archlint.report.wording import price_text

    share = ckpt.evidence["memory_saved_bytes"] / r["peak_bytes"]
    assert f"saves {share:.1%} of step peak memory (static)" in price_text(ckpt)  # worded as memory, not time


def test_fits_gives_no_finding_and_a_gpu_spec_adds_the_context():
    from archlint.devices import resolve

    r = fit_report(tower(), (X,), {}, optimizer="adamw", device_spec=resolve("t4"))
    found = findings(tower(), (X,), {}, r, optimizer="adamw", loss="mean", device_spec=resolve("t4"))
    assert r["fits"] and not found
    alloc = r["allocator"]
    assert r["device_peak_bytes"] == alloc["reserved_at_peak_bytes_lower_bound"] + alloc["cuda_context_bytes"]
    assert r["peak_bytes"] % 512 == 0  # blocks rounded to 512 bytes
    assert r["budget_source"] == "device spec t4: memory-gib (16 GiB)"  # the spec file says it, with its source


def test_gpu_rounding_is_per_block():
    cpu = step_memory(tower(), (torch.randn(3, 32),), optimizer="sgd")
    from archlint.devices import resolve

    gpu = step_memory(tower(), (torch.randn(3, 32),), optimizer="sgd", device_spec=resolve("h100-sxm"))
    assert gpu["peak_bytes"] > cpu["peak_bytes"] and gpu["params_bytes"] % 512 == 0
    # tiny blocks: all in 2 MiB small-pool segments
    assert gpu["allocator"]["reserved_at_peak_bytes_lower_bound"] == -(-gpu["peak_bytes"] // (2 << 20)) * (2 << 20)


def test_reserved_lower_bound_packs_segments():
    from archlint.model.train.memory import reserved_lower_bound

    MiB = 1 << 20
    assert reserved_lower_bound([512, 512]) == 2 * MiB
    assert reserved_lower_bound([3 * MiB, 3 * MiB]) == 20 * MiB
    assert reserved_lower_bound([11 * MiB]) == 12 * MiB
    assert reserved_lower_bound([MiB, 2 * MiB, 11 * MiB]) == 2 * MiB + 20 * MiB + 12 * MiB


def test_budget_parsing_and_rule_page():
    assert parse_bytes("24GB") == 24 * 10**9 and parse_bytes("16GiB") == 16 * 2**30
    with pytest.raises(UsageError):
        parse_bytes("lots")
    assert registry.get(CODE).name == "batch-does-not-fit"


def test_with_batch_keeps_real_inputs_real_and_their_values():
    # a model the meta device cannot run is measured on real tensors: resized inputs must stay
    # real, with token ids from the original rows (a meta or empty tensor would break the step)
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    (a,), k = with_batch((ids,), {"attention_mask": torch.ones(2, 3, dtype=torch.bool)}, 5)
    assert a.device.type == "cpu" and a.tolist() == [[1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6], [1, 2, 3]]
    assert k["attention_mask"].shape == (5, 3) and bool(k["attention_mask"].all())
    (m,), _ = with_batch((torch.empty(2, 3, device="meta"),), {}, 4)
    assert m.device.type == "meta" and m.shape == (4, 3)


def test_max_batch_of_a_model_the_meta_device_cannot_run():
    class ItemNet(nn.Module):  # a branch on a weight's data: .item() has no meta answer
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(32, 32)

        def forward(self, x):  # (one on the input alone is answered on meta: test_train_values)
            return self.lin(x) * (2.0 if self.lin.weight.sum().item() > -1e9 else 1.0)

    model = ItemNet()
    budget = step_memory(model, (torch.randn(40, 32),), {}, optimizer="sgd")["peak_bytes"]
    r = fit_report(model, (torch.randn(8, 32),), {}, optimizer="sgd", budget_bytes=budget)
    assert "real tensors" in r["basis"] and r["max_batch"] >= 8


def test_max_batch_on_a_gpu_spec_allows_for_the_measured_error():
    """max_batch fits under ALLOCATED_LOW x the limit (sure to fit if the model counts its storages 4%
    short), the next does not; the range's high end fits under ALLOCATED_HIGH x the limit, the next
    does not (it cannot fit if the model counts 10% over)."""
    from archlint.devices import resolve
    from archlint.model.train import fit as fit_module

    spec = resolve("h100-sxm")
    model = tower()
    one = step_memory(model, (torch.randn(4096, 32),), {}, optimizer="adam", device_spec=spec)
    budget = one["device_peak_bytes"]
    r = fit_report(model, (torch.randn(1024, 32),), {}, optimizer="adam", budget_bytes=budget, device_spec=spec)
    low, high = r["max_batch_range"]
    assert low == r["max_batch"] < high
    assert "H200" in r["max_batch_basis"]["range_basis"] and "0.96" in r["max_batch_basis"]["basis"]

    def fits(b, scale):
        args, kwargs = with_batch((X,), {}, b)
        m = step_memory(
            model, args, kwargs, optimizer="adam", budget_bytes=budget, device_spec=spec, limit_scales=(scale,)
        )
        run = m["allocator"]["under_budget"]["scaled"][0]
        assert run["limit_bytes"] == int((budget - m["allocator"]["cuda_context_bytes"]) * scale)
        return not run["out_of_memory"]

    assert fits(low, fit_module.ALLOCATED_LOW) and not fits(low + 1, fit_module.ALLOCATED_LOW)
    assert fits(high, fit_module.ALLOCATED_HIGH) and not fits(high + 1, fit_module.ALLOCATED_HIGH)
    # 4096 rows were the budget exactly: the sure batch is below it, the high end above it
    assert low < 4096 < high


def test_no_range_without_a_gpu_spec():
    r = fit_report(tower(), (X,), {}, optimizer="adam", budget_bytes=peak(tower(), 300))
    assert "max_batch_range" not in r and "range_basis" not in r["max_batch_basis"]


def test_max_batch_on_a_staircase_halves_the_bracket_where_the_secant_stalls():
    # a GPU's reserved peak grows in segments: flat steps, where secant steps advance by one batch
    curve = lambda b: 1_000_000 + 20_000 * (b // 64)  # noqa: E731
    budget = curve(4096)
    r = max_batch(curve, 1024, budget)
    n = r["max_batch"]
    assert curve(n) <= budget < curve(n + 1) and n == 4159
    assert "not evaluated" not in r["basis"]


def test_max_batch_on_a_gpu_spec_where_small_batches_peak_in_the_optimizer_step():
    # vit_b_16 on an H100: at batches 1 and 2 the peak is the optimizer step's (4 kB a sample), so the
    # line points 19.5M batches out; halving from there spent the 16 evaluations and said max_batch 2
    budget = 80_000_000_000

    def curve(b):  # the step's peak as fit.scaled_peak reports it: clamped to the budget's side
        smooth = max(2_524_900_000 + 4267 * b, 2_192_290_000 + 132_480_000 * b)
        return max(smooth, budget + 1) if smooth > budget else smooth

    r = max_batch(curve, 1, budget, bisect=True)
    n = r["max_batch"]
    assert curve(n) <= budget < curve(n + 1) and n == 587
    assert "not evaluated" not in r["basis"] and len(r["evaluations"]) <= 10


def test_max_batch_out_of_evaluations_says_what_it_did_not_resolve(monkeypatch):
    from archlint.model.train import fit as fit_module

    monkeypatch.setattr(fit_module, "MAX_EVALUATIONS", 4)
    curve = lambda b: 1_000_000 + 20_000 * (b // 512)  # noqa: E731
    r = max_batch(curve, 1024, curve(4096))
    assert curve(r["max_batch"]) <= curve(4096) and "were not evaluated" in r["basis"]


def test_with_batch_makes_a_huge_float_input_meta_and_keeps_ids_real():
    from archlint.model.train.fit import REAL_INPUT_BYTES

    rows = REAL_INPUT_BYTES // (256 * 4) + 1
    (x, ids), _ = with_batch((torch.randn(2, 256), torch.tensor([[1, 2], [3, 4]])), {}, rows)
    assert x.device.type == "meta" and x.shape == (rows, 256)
    assert ids.device.type == "cpu" and ids[-1].tolist() == ([3, 4] if rows % 2 == 0 else [1, 2])
    (small,), _ = with_batch((torch.randn(2, 256),), {}, 4)
    assert small.device.type == "cpu"


def test_with_batch_keeps_the_layout_of_an_input_it_makes_meta():
    """An input made meta (over the real limit: fit_report's is values.VALUE_LIMIT_BYTES where the step
    runs on meta) keeps the layout its real rows would have: a channels-last image stayed contiguous,
    and a model's `.contiguous()` then copied nothing (its step 25 MB short at 8 x 3 x 512 x 512)."""
    image = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)
    for x in (image, torch.randn(2, 6).t().contiguous().t()[:, :5], torch.randn(2, 4, 6).permute(0, 2, 1)):
        (real,), _ = with_batch((x,), {}, 5)
        (meta,), _ = with_batch((x,), {}, 5, real_limit=0)
        (again,), _ = with_batch((x.to("meta"),), {}, 5)
        assert real.device.type == "cpu" and meta.device.type == again.device.type == "meta"
        assert meta.shape == again.shape == real.shape and meta.stride() == again.stride() == real.stride()


def test_max_batch_starts_from_known_peaks_and_counts_only_its_own_evaluations(monkeypatch):
    # fit_report's search for max_batch_range's high end: every evaluation of the first search
    # replayed the allocator under both scales, so their answers bracket the second at no cost
    from archlint.model.train import fit as fit_module

    curve = lambda b: 1_000_000 + 20_000 * (b // 64)  # noqa: E731
    budget = curve(4096)
    calls = []
    alone = max_batch(lambda b: calls.append(b) or curve(b), 1024, budget, True)
    cold = len(calls)
    calls.clear()
    known = {b: curve(b) for b in (1024, 2048, 4000, 4300)}
    seeded = max_batch(lambda b: calls.append(b) or curve(b), 1024, budget, True, known=known)
    assert seeded["max_batch"] == alone["max_batch"] == 4159
    assert not set(calls) & set(known) and len(calls) < cold
    # the known peaks do not use up the search's MAX_EVALUATIONS
    monkeypatch.setattr(fit_module, "MAX_EVALUATIONS", len(calls))
    assert max_batch(curve, 1024, budget, True, known=known)["max_batch"] == 4159


@pytest.mark.parametrize("near", [4159, 4150, 4170, 3000, 6000, 1])
def test_max_batch_stepping_out_from_where_the_answer_is_expected(near):
    # max_batch_range's high end is searched from where max_batch says it should be: the same
    # answer wherever that is, in few evaluations when it is close
    curve = lambda b: 1_000_000 + 20_000 * (b // 64)  # noqa: E731
    budget = curve(4096)
    calls = []
    r = max_batch(lambda b: calls.append(b) or curve(b), 1024, budget, True, near=near)
    assert r["max_batch"] == 4159 and "not evaluated" not in r["basis"]
    if abs(near - 4159) <= 11:
        assert len(calls) <= 2 + 1 + 2 * 4 + 1, calls  # the line's two, `near`, steps out, halving within


def test_high_end_expected_from_max_batch():
    from archlint.model.train.fit import ALLOCATED_HIGH, ALLOCATED_LOW, _high_end_near

    at = {1: {"peak_bytes": 1_000 + 100}, 500: {"peak_bytes": 1_000 + 100 * 500}}
    near = _high_end_near(at, 500)
    assert abs((1_000 + 100 * near) / (1_000 + 100 * 500) - ALLOCATED_HIGH / ALLOCATED_LOW) < 0.01
    assert _high_end_near(at, 1) is None and _high_end_near(at, 7) is None


def test_the_range_high_end_is_resolved_where_its_own_search_ran_out(monkeypatch):
    # ResNet-18 on an H100: the step's peak barely grows from batch 1 to 2 (the optimizer step
    # dominates), so the line's first guess is far too high; halving from there, the high end's
    # search ran out of evaluations and max_batch_range said 4160 where 4167 fits (batches 4161-4178
    # "not evaluated", a caveat the range did not carry). It now starts from the first search's
    # evaluations and from where max_batch puts it.
    from archlint.devices import resolve
    from archlint.model.train import fit as fit_module

    spec = resolve("h100-sxm")
    context, budget = 619 << 20, spec.memory_bytes

    def peak_at(b):
        return max(964_000_000 + 600_000 * b, 11_000_000 * b)

    def fake_step_memory(model, args, kwargs, **options):
        b, limit = fit_module.batch_size(args, kwargs), budget - context
        peak = peak_at(b)
        runs = [{"scale": s, "out_of_memory": peak * 1.02 > limit * s} for s in options["limit_scales"]]
        return {
            "basis": "measured on the meta device",
            "peak_bytes": peak,
            "needed_bytes": peak + context,
            "fits": peak + context <= budget,
            "budget_bytes": budget,
            "allocator": {"cuda_context_bytes": context, "under_budget": {"scaled": runs}},
        }

    calls = []
    monkeypatch.setattr(fit_module, "step_memory", lambda *a, **k: calls.append(1) or fake_step_memory(*a, **k))
    r = fit_report(nn.Linear(2, 2), (torch.randn(1, 2),), {}, optimizer="adam", device_spec=spec)

    def largest(scale):
        return max(b for b in range(1, 20_000) if peak_at(b) * 1.02 <= (budget - context) * scale)

    low, high = r["max_batch_range"]
    assert high == largest(fit_module.ALLOCATED_HIGH)  # was: 11 batches short, its search out of evaluations
    # max_batch's own search is unchanged: where it runs out, its basis says so
    assert low == largest(fit_module.ALLOCATED_LOW) or "were not evaluated" in r["max_batch_basis"]["basis"]
    assert len(calls) <= 2 * fit_module.MAX_EVALUATIONS
    assert "the high end:" not in r["max_batch_basis"]["range_basis"]
    # where the high end's search runs out all the same, the range says so (it did not)
    monkeypatch.setattr(fit_module, "MAX_EVALUATIONS", 3)
    monkeypatch.setattr(fit_module, "STEP_OUT", 0)
    r = fit_report(nn.Linear(2, 2), (torch.randn(1, 2),), {}, optimizer="adam", device_spec=spec)
    assert "; the high end: the largest batch evaluated that fits; batches " in r["max_batch_basis"]["range_basis"]


class _ChecksItsMask(nn.Module):
    """Reads its mask's data (`mask.all()`, as Hugging Face's attention does to pick a kernel): the meta
    step answers it from the mask's real values, kept only up to values.VALUE_LIMIT_BYTES."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x, mask):
        y = self.fc(x)
        return y * 2 if bool(mask.all()) else y


def test_max_batch_never_runs_a_real_step_where_the_meta_step_stops_running():
    # A batch whose mask is past the values' limit cannot run on meta; the search ran that batch's
    # whole step on real tensors instead (a tiny Llama given an attention mask tried to allocate
    # 6.6 GB at batch 810,703 on an H100's budget). It now keeps below that batch and says so.
    from archlint.model.train import values

    rows = values.VALUE_LIMIT_BYTES // (64 * 8)  # the largest mask batch whose values are kept
    x, mask = torch.randn(2, 16), torch.ones(2, 64, dtype=torch.long)
    r = fit_report(_ChecksItsMask(), (x, mask), {}, optimizer="sgd", budget_bytes=1 << 40)
    assert r["basis"].startswith("measured on the meta")
    assert r["max_batch"] is not None and r["max_batch"] <= rows
    assert "cannot run on the meta device" in r["max_batch_basis"]["basis"]
    assert max(b for b, _ in r["max_batch_basis"]["evaluations"]) <= rows


def test_a_search_stopped_at_its_second_batch_gives_no_line():
    # the step cannot run on meta at twice the input's batch: one batch measured, no per-sample or
    # fixed bytes (they read 0, as if measured)
    from archlint.model.train import values

    rows = values.VALUE_LIMIT_BYTES // (64 * 8)  # the largest mask batch whose values are kept
    x, mask = torch.randn(rows, 16), torch.ones(rows, 64, dtype=torch.long)
    r = fit_report(_ChecksItsMask(), (x, mask), {}, optimizer="sgd", budget_bytes=1 << 40)
    line = r["max_batch_basis"]
    assert line["basis"].startswith(f"not searched above batch {rows}")
    assert line["per_sample_bytes"] is None and line["fixed_bytes"] is None
