"""The torch behaviours the distributed-settings rules (AL410-AL415, AL201) state, measured on this
CPU with the gloo backend and 2 ranks. Each page cites the figures this prints.

- AL411: bucket all-reduces of 3 micro-batches under DDP's no_sync() plus one that syncs, with the
  forward inside the `with`, outside it, and with no no_sync at all; and FSDP v1 / FSDP2
  reduce-scatters with their switch (no_sync / set_requires_gradient_sync) around the backward only.
- AL413: all-gathers and reduce-scatters per step of FSDP2 with only the root sharded against
  each block sharded.
- AL414: all-gathers per step of FSDP v1 with (reentrant and non-reentrant) activation
  checkpointing inside and outside each unit, and FSDP2 with it applied before and after fully_shard.
- AL415: where DDP's gradients live with and without gradient_as_bucket_view.
- AL201: the step at which DDP fails on a model with an unused module.

    python benchmarks/distributed_settings.py      # ~1 minute; prints one JSON object
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import os
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

PORT = "29541"


class Block(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x):
        return x + self.b(torch.relu(self.a(x)))


def _counts(run) -> dict[str, int]:
    from torch.distributed.tensor.debug import CommDebugMode

    with CommDebugMode() as comm:
        run()
    return {str(op).split(".")[-1].strip("_"): n for op, n in sorted(comm.get_comm_counts().items(), key=str)}


def ddp_no_sync() -> dict:
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1)))
    calls = collections.Counter()

    def hook(state, bucket):  # counts the bucket all-reduces DDP launches
        calls["all_reduce"] += 1
        return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(lambda f: f.value()[0])

    model.register_comm_hook(None, hook)
    x, out = torch.randn(4, 8), {}
    for where in ("no no_sync", "forward and backward inside", "backward only inside"):
        before = calls["all_reduce"]
        for _ in range(3):  # micro-batches that do not step
            if where == "forward and backward inside":
                with model.no_sync():
                    model(x).sum().backward()
            elif where == "backward only inside":
                loss = model(x).sum()
                with model.no_sync():
                    loss.backward()
            else:
                model(x).sum().backward()
        model(x).sum().backward()  # the micro-batch that steps
        out[where] = calls["all_reduce"] - before
    return out


@contextlib.contextmanager
def _gradient_sync_off(model):
    """FSDP2's counterpart of no_sync()."""
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


def fsdp_no_sync() -> dict:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import fully_shard

    out, x = {}, torch.randn(2, 16)
    for api in ("FSDP v1 no_sync", "FSDP2 set_requires_gradient_sync"):
        for where in ("forward and backward inside", "backward only inside"):
            torch.manual_seed(0)
            net = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 16))
            if api.startswith("FSDP v1"):
                model = FSDP(net, device_id=torch.device("cpu"))
                switch = model.no_sync
            else:
                fully_shard(net)
                model = net
                switch = functools.partial(_gradient_sync_off, model)

            def three_micro_batches(model=model, switch=switch, where=where):
                for _ in range(3):
                    if where == "backward only inside":
                        loss = model(x).sum()
                        with switch():
                            loss.backward()
                    else:
                        with switch():
                            model(x).sum().backward()

            out[f"{api}, {where}"] = _counts(three_micro_batches)
    return out


def fsdp2_units() -> dict:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )
    from torch.distributed.fsdp import fully_shard

    out = {}
    for layout in (
        "root only",
        "each block",
        "each block, checkpoint applied before fully_shard",
        "each block, checkpoint applied after fully_shard",
    ):
        torch.manual_seed(0)
        model = nn.Sequential(*[Block() for _ in range(4)])
        if "before" in layout:
            apply_activation_checkpointing(
                model, checkpoint_wrapper_fn=checkpoint_wrapper, check_fn=lambda m: isinstance(m, Block)
            )
        if layout != "root only":
            for block in model:
                fully_shard(block)
        fully_shard(model)
        if "after" in layout:
            apply_activation_checkpointing(
                model, checkpoint_wrapper_fn=checkpoint_wrapper, check_fn=lambda m: isinstance(m, Block)
            )
        x = torch.randn(2, 16)
        model(x).sum().backward()  # the first step sets up; the second is counted
        out[layout] = _counts(lambda model=model, x=x: model(x).sum().backward())
    return out


def fsdp1_checkpoint() -> dict:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        checkpoint_wrapper,
    )
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    cpu, out = torch.device("cpu"), {}
    for impl in (CheckpointImpl.REENTRANT, CheckpointImpl.NO_REENTRANT):
        for where in ("inside each unit", "outside each unit", "none"):
            torch.manual_seed(0)
            blocks = []
            for _ in range(4):
                if where == "inside each unit":
                    blocks.append(FSDP(checkpoint_wrapper(Block(), checkpoint_impl=impl), device_id=cpu))
                elif where == "outside each unit":
                    blocks.append(checkpoint_wrapper(FSDP(Block(), device_id=cpu), checkpoint_impl=impl))
                else:
                    blocks.append(FSDP(Block(), device_id=cpu))
            model = FSDP(nn.Sequential(*blocks), device_id=cpu)
            x = torch.randn(2, 16, requires_grad=True)
            model(x).sum().backward()
            out[f"{impl.name.lower()}, {where}"] = _counts(lambda model=model, x=x: model(x).sum().backward())
    return out


def ddp_bucket_view() -> dict:
    from torch.nn.parallel import DistributedDataParallel as DDP

    out = {}
    for view in (False, True):
        torch.manual_seed(0)
        net = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)])
        model = DDP(net, gradient_as_bucket_view=view, bucket_cap_mb=1)
        for _ in range(2):
            model(torch.randn(4, 256)).sum().backward()
        grads = [p.grad for p in net.parameters()]
        out[f"gradient_as_bucket_view={view}"] = {
            "gradients": len(grads),
            "distinct storages": len({g.untyped_storage().data_ptr() for g in grads}),
            "gradient bytes": sum(g.numel() * g.element_size() for g in grads),
        }
    return out


def ddp_unused_module() -> str:
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x):
            return self.used(x)

    model = DDP(Net())
    for step in range(3):
        try:
            model(torch.randn(2, 4)).sum().backward()
        except RuntimeError as exc:
            return f"step {step + 1} fails: {str(exc).split('.')[0]}"
    return "no failure in 3 steps"


def _worker(rank: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=PORT)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    result = {
        "torch": torch.__version__,
        "AL411 DDP bucket all-reduces (3 micro-batches under no_sync + 1 synced)": ddp_no_sync(),
        "AL411 FSDP collectives, 3 micro-batches with the sync switch off": fsdp_no_sync(),
        "AL413/AL414 FSDP2 collectives per step, 4 blocks": fsdp2_units(),
        "AL414 FSDP v1 collectives per step, 4 units": fsdp1_checkpoint(),
        "AL415 DDP gradients": ddp_bucket_view(),
        "AL201 DDP with an unused module": ddp_unused_module(),
    }
    if rank == 0:
        queue.put(result)
    dist.destroy_process_group()


def main() -> None:
    context = mp.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_worker, args=(rank, queue)) for rank in range(2)]
    for w in workers:
        w.start()
    print(json.dumps(queue.get(timeout=600), indent=1))
    for w in workers:
        w.join()


if __name__ == "__main__":
    main()
