"""The import table resolves what libcst's QualifiedNameProvider resolves for the calls checks ask about,
and refuses shadowed names."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, QualifiedNameProvider

from archlint.code.engine import lint_text
from archlint.code.facts import Facts

ALIASES = [
    "from torch.utils.data import DataLoader as DL\nDL(ds)",
    "import torch.utils.data as tud\ntud.DataLoader(ds)",
    "import torch\ntorch.utils.data.DataLoader(ds)",
    "import torch.utils.data\ntorch.utils.data.DataLoader(ds)",
    "from torch.utils import data\ndata.DataLoader(ds)",
    "from torch.utils.data import dataloader\ndataloader.DataLoader(ds)",
    "from torch.utils.data.dataloader import DataLoader\nDataLoader(ds)",
]


@pytest.mark.parametrize("source", ALIASES)
def test_dataloader_aliases(source):
    module = cst.parse_module(source)
    facts = Facts(module, source)
    call = facts.calls[-1].node
    assert facts.qname(call.func) == "torch.utils.data.DataLoader"
    names = set()

    class Names(cst.CSTVisitor):
        METADATA_DEPENDENCIES = (QualifiedNameProvider,)

        def visit_Call(self, node):
            if node is call:
                names.update(q.name for q in self.get_metadata(QualifiedNameProvider, node.func))

    MetadataWrapper(module, unsafe_skip_copy=True).visit(Names())
    assert names & {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}


@pytest.mark.parametrize(
    "source",
    [
        "from torch.utils.data import DataLoader\nDataLoader = MyLoader\nDataLoader(ds)",
        "from torch.utils.data import DataLoader\ndef f(DataLoader):\n    DataLoader(ds)",
        "DataLoader(ds)",
        "from mylib import DataLoader\nDataLoader(ds)",
    ],
)
def test_unknown_or_shadowed_is_not_dataloader(source):
    facts = Facts(cst.parse_module(source), source)
    site = facts.calls[-1]
    assert facts.qname(site.node.func, site.scope) != "torch.utils.data.DataLoader"


def test_shadowing_is_per_scope():
    """A loop variable `data` in train() does not hide `from torch.utils import data` in main()."""
    src = (
        "import torch\nfrom torch.utils import data\n"
        "def main():\n    return data.DataLoader(ds, num_workers=2)\n"
        "def train(loader):\n    for data, target in loader:\n        data = data.cuda()\n"
    )
    assert _codes(src) == ["AL301"]


def _codes(source):
    return [d.code for d in lint_text(source, "t.py")]


def test_dict_kwargs_resolved_with_updates():
    base = "import torch\nfrom torch.utils.data import DataLoader\ndef main():\n    x = 1 .cuda()\n"
    pinned = base + '    kw = {"num_workers": 4}\n    kw.update({"pin_memory": True})\n    DataLoader(ds, **kw)\n'
    assert _codes(pinned) == []
    item = base + '    kw = dict(num_workers=4)\n    kw["pin_memory"] = True\n    DataLoader(ds, **kw)\n'
    assert _codes(item) == []
    missing = base + '    kw = {"num_workers": 4}\n    DataLoader(ds, **kw)\n'
    assert _codes(missing) == ["AL301"]
    other = base + '    kw = {"num_workers": 4}\n    kw.update(cfg)\n    DataLoader(ds, **kw)\n'
    assert _codes(other) == []  # updated from something unknown: not a finding
    handed = base + '    kw = {"num_workers": 4}\n    add_cuda_options(kw)\n    DataLoader(ds, **kw)\n'
    assert _codes(handed) == []  # a function may have added pin_memory
    param = base.replace("main()", "main(kw)") + "    DataLoader(ds, **kw)\n"
    assert _codes(param) == []


def test_positional_arguments():
    src = "import torch\nfrom torch.utils.data import DataLoader\nDataLoader(ds, 8, True, None, None, 0, None, True)\nx.cuda()\n"
    assert _codes(src) == ["AL304"]


def test_unknown_values_are_not_findings():
    src = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "DataLoader(ds, num_workers=args.workers, pin_memory=args.pin)\nx.cuda()\n"
    )
    assert _codes(src) == []


def test_while_next_loop_is_a_batch_loop():
    src = """import torch
from torch.utils.data import DataLoader
loader = DataLoader(ds, num_workers=4, pin_memory=True)
it = iter(loader)
while True:
    x, y = next(it)
    x = x.cuda()
    loss = model(x).sum()
    loss.backward()
    total = loss.item()
"""
    found = [(d.line, d.code) for d in lint_text(src, "t.py")]
    assert (7, "AL302") in found and (10, "AL401") in found


def test_sync_in_training_loop_if_and_synchronize():
    src = """import torch
for step, (x, y) in enumerate(train_loader):
    x, y = x.cuda(), y.cuda()
    out = model(x)
    loss = criterion(out, y)
    if torch.isnan(loss).any():
        continue
    if out is None or "k" in y or isinstance(out, tuple) or out.shape[0] != 8:
        pass
    if step % 100 == 0:
        print(loss)
    loss.backward()
    torch.cuda.synchronize()
"""
    assert [(d.line, d.code) for d in lint_text(src, "t.py")] == [(2, "AL403"), (6, "AL401"), (13, "AL401")]
