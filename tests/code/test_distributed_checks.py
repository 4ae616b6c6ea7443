"""Edges of the distributed-settings rules (AL409-AL415): what each stays silent on, and the fixes."""

from __future__ import annotations

import textwrap

import pytest

from archlint.code.engine import lint_text


def codes(source: str) -> list[str]:
    return [d.code for d in lint_text(textwrap.dedent(source), "train.py")]


DDP_HEAD = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
"""


@pytest.mark.parametrize(
    ("call", "fires"),
    [
        ("DDP(model, find_unused_parameters=True)", True),
        ("DDP(model, find_unused_parameters=True, static_graph=True)", False),  # no walk after step 1
        ("DDP(model, find_unused_parameters=args.find_unused)", False),  # not visible
        ("DDP(model, **{'find_unused_parameters': True})", True),
        ("DDP(model)", False),
    ],
)
def test_al410_literal_flag_only(call, fires):
    assert ("AL410" in codes(DDP_HEAD + f"model = {call}\n")) == fires


def test_al410_framework_spellings():
    source = """
    import lightning.pytorch as pl
    import transformers
    from accelerate.utils import DistributedDataParallelKwargs
    from lightning.pytorch.strategies import DDPStrategy

    a = DistributedDataParallelKwargs(find_unused_parameters=True)
    b = DDPStrategy(find_unused_parameters=True)
    c = transformers.TrainingArguments("out", ddp_find_unused_parameters=True)
    d = pl.Trainer(strategy="ddp_find_unused_parameters_true")
    e = pl.Trainer(strategy="ddp")
    f = DDPStrategy(find_unused_parameters=False)
    """
    assert [d.line for d in lint_text(textwrap.dedent(source), "t.py") if d.code == "AL410"] == [7, 8, 9, 10]


NO_SYNC = """
import torch
{imports}

def train(model, loader, opt, accum, accelerator=None):
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        if (i + 1) % accum:
            with {ctx}:
                loss.backward()
        else:
            loss.backward()
            opt.step()
"""


@pytest.mark.parametrize(
    ("imports", "ctx", "fires"),
    [
        ("from torch.nn.parallel import DistributedDataParallel", "model.no_sync()", True),
        ("from torch.nn.parallel import DistributedDataParallel", "accelerator.no_sync(model)", True),
        # FSDP honours the switch in the backward (measured): not this rule's
        ("from torch.distributed.fsdp import FullyShardedDataParallel", "model.no_sync()", False),
        (
            "from torch.nn.parallel import DistributedDataParallel\nfrom torch.distributed.fsdp import fully_shard",
            "model.no_sync()",
            False,
        ),
        # accelerate alone: its backend (DDP or FSDP) is chosen outside the code
        ("from accelerate import Accelerator", "accelerator.no_sync(model)", False),
    ],
)
def test_al411_only_where_ddp_is_the_wrapper(imports, ctx, fires):
    assert ("AL411" in codes(NO_SYNC.format(imports=imports, ctx=ctx))) == fires


def test_al411_silent_when_the_forward_runs_elsewhere():
    source = (
        DDP_HEAD
        + """
def backward_only(model, loss):
    with model.no_sync():
        loss.backward()
"""
    )
    assert "AL411" not in codes(source)


def test_al409_micro_batch_loop_and_its_cures():
    loop = """
def train(model, batches, opt, accum):
    model = DDP(model)
    for step in range(1000):
        for micro in range(accum):
            {pre}loss = model(batches()).sum()
            loss.backward()
        opt.step()
"""
    assert "AL409" in codes(DDP_HEAD + loop.format(pre=""))
    assert "AL409" not in codes(
        DDP_HEAD + loop.format(pre="model.require_backward_grad_sync = micro == accum - 1\n            ")
    )
    # the step inside the micro loop: no accumulation
    assert "AL409" not in codes(DDP_HEAD + loop.format(pre="").replace("        opt.step()", "            opt.step()"))


SYNCBN = """
import torch
from torch import nn
from torch.utils.data import DataLoader

def main(model, ds, opt, args):
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    loader = DataLoader(ds, batch_size={batch})
    for x, y in loader:
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"""


@pytest.mark.parametrize(("batch", "fires"), [("256", True), ("32", True), ("16", False), ("args.batch_size", False)])
def test_al412_only_at_a_literal_per_gpu_batch_of_32_or_more(batch, fires):
    assert ("AL412" in codes(SYNCBN.format(batch=batch))) == fires


FSDP_HEAD = """
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
from torch.distributed.fsdp.wrap import enable_wrap, wrap

def train(model, loader, opt):
    for x in loader:
        model(x).sum().backward()
        opt.step()
"""


@pytest.mark.parametrize(
    ("setup", "fires"),
    [
        ("model = FSDP(model)", True),
        ("model = FSDP(model, auto_wrap_policy=policy)", False),
        ("model = FSDP(model, auto_wrap_policy=None)", True),
        ("model = FSDP(model, **kwargs)", False),  # the policy may be in kwargs
        ("blocks = [FSDP(b) for b in model.blocks]\nmodel = FSDP(model)", False),  # wrapped per block by hand
        ("model.blocks = torch.nn.ModuleList([FSDP(b) for b in model.blocks])", False),  # the root is elsewhere
        ("with enable_wrap(wrapper_cls=FSDP):\n    model = wrap(model)\nmodel = FSDP(model)", False),
        ("fully_shard(model)", True),
        ("for block in model.layers:\n    fully_shard(block)\nfully_shard(model)", False),
        # a helper this file never calls: its callers (elsewhere) decide what it shards
        ("def apply_fsdp(module):\n    fully_shard(module)", False),
        ("def apply_fsdp(module):\n    fully_shard(module)\nfor b in model.layers:\n    apply_fsdp(b)", False),
    ],
)
def test_al413_one_unit(setup, fires):
    assert ("AL413" in codes(FSDP_HEAD + setup + "\n")) == fires


def test_al413_needs_a_training_file():
    assert "AL413" not in codes(
        "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nmodel = FSDP(model)\n"
    )


def test_al414_reentrant_outside_only():
    head = """
import functools
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)
"""
    cases = {
        "checkpoint_wrapper(FSDP(b), checkpoint_impl=CheckpointImpl.REENTRANT)": True,
        "checkpoint_wrapper(FSDP(b))": False,  # non-reentrant: measured no extra all-gather
        "FSDP(checkpoint_wrapper(b, checkpoint_impl=CheckpointImpl.REENTRANT))": False,
        "torch.utils.checkpoint.checkpoint(FSDP(b), x, use_reentrant=True)": True,
        "torch.utils.checkpoint.checkpoint(FSDP(b), x, use_reentrant=False)": False,
        "apply_activation_checkpointing(m, checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, "
        "checkpoint_impl=CheckpointImpl.REENTRANT), check_fn=lambda s: isinstance(s, FSDP))": True,
        "apply_activation_checkpointing(m, checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, "
        "checkpoint_impl=CheckpointImpl.REENTRANT), check_fn=lambda s: isinstance(s, Block))": False,
    }
    for line, fires in cases.items():
        assert ("AL414" in codes(head + f"y = {line}\n")) == fires, line


def test_al415_fix_adds_or_flips_the_flag():
    source = (
        DDP_HEAD + "a = DDP(model, device_ids=[0])\nb = DDP(model, gradient_as_bucket_view=False)\n"
        "c = DDP(model, gradient_as_bucket_view=True)\n"
    )
    found = [d for d in lint_text(source, "t.py") if d.code == "AL415"]
    assert [d.line for d in found] == [4, 5] and all(d.severity.value == "info" for d in found)
    assert found[0].fix.edits[0].content == ", gradient_as_bucket_view=True"
    assert found[1].fix.edits[0].content == "True" and found[1].fix.applicability.value == "unsafe"


def test_al409_prices_the_waste_when_the_micro_batch_count_is_a_literal():
    loop = (
        DDP_HEAD
        + """
ACCUM = 4

def train(model, batches, opt, loader):
    model = DDP(model)
    for step in range(1000):
        for micro in range({count}):
            model(batches()).sum().backward()
        opt.step()
    for i, x in enumerate(loader):
        model(x).sum().backward()
        if (i + 1) % {count} == 0:
            opt.step()
"""
    )
    found = [d.message for d in lint_text(loop.format(count="ACCUM"), "t.py") if d.code == "AL409"]
    assert len(found) == 2 and all("4 micro-batches per step: 3 of every 4 all-reduces are wasted" in m for m in found)
    found = [d.message for d in lint_text(loop.format(count="args.accum"), "t.py") if d.code == "AL409"]
    assert len(found) == 2 and not any("micro-batches per step" in m for m in found)


@pytest.mark.parametrize(
    ("args", "fires"),
    [
        ('"out", per_device_train_batch_size=16', True),  # the Trainer's own default turns the walk on
        ('"out", ddp_find_unused_parameters=False', False),
        ('"out", gradient_checkpointing=True', False),  # the Trainer leaves the flag off then
        ('"out", **config', False),  # not visible
        ('"out")\nmodel.gradient_checkpointing_enable(', False),
    ],
)
def test_al410_hugging_face_trainer_default(args, fires):
    source = f"import torch\nfrom transformers import TrainingArguments\nargs = TrainingArguments({args})\n"
    found = [d for d in lint_text(source, "t.py") if d.code == "AL410"]
    assert bool(found) == fires
    assert all("Hugging Face Trainer passes find_unused_parameters=True" in d.message for d in found)
