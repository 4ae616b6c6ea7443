"""Costs of common ops a new user's first model hits (issue 15): recurrent layers, embeddings,
interpolation modes, unfold/fold, transformer layers whatever path they take, detection ops.

References: torch.utils.flop_counter.FlopCounterMode (counts the matmuls inside nn.LSTM/GRU/RNN on
CPU; it reports 2 per multiply-add) and fvcore (upsampling) where they count the op."""

from __future__ import annotations

import json
import logging
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from archlint.cli import main
from archlint.config import Settings
from archlint.model.analyze import analyze_model


class Wrap(nn.Module):
    """The layer under test as a submodule (a leaf inside the user's model, as in real code)."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        out = self.layer(x)
        return out[0] if isinstance(out, tuple) else out


def analyze(model, *inputs, strategy=None):
    s = Settings()
    s.strategy = strategy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, result = analyze_model(model.eval(), inputs, s)
    assert result.totals.unknown_ops == 0, [(x.op, x.kind) for x in result.layers if not x.known]
    return result


def torch_macs(model, x) -> int:
    # oneDNN's fused LSTM is one opaque op to the counter: off, the matmuls are visible
    with torch.backends.mkldnn.flags(enabled=False), FlopCounterMode(display=False) as counter:
        model(x)
    return counter.get_total_flops() // 2


RECURRENT = [
    (
        "lstm_2layer_bidir_proj_batch_first",
        nn.LSTM(16, 32, num_layers=2, bidirectional=True, proj_size=8, batch_first=True),
        (3, 5, 16),
        13,
    ),
    ("lstm_seq_first", nn.LSTM(16, 24), (7, 2, 16), 13),
    ("lstm_unbatched", nn.LSTM(16, 24, num_layers=3), (7, 16), 13),
    ("gru_bidir", nn.GRU(16, 32, bidirectional=True, batch_first=True), (2, 6, 16), 11),
    ("gru_no_bias", nn.GRU(16, 32, num_layers=2, bias=False), (6, 2, 16), 11),
    ("rnn_relu", nn.RNN(16, 32, nonlinearity="relu", num_layers=2), (6, 2, 16), 2),
    ("lstm_cell", nn.LSTMCell(16, 32), (4, 16), 13),
    ("gru_cell", nn.GRUCell(16, 32), (4, 16), 11),
    ("rnn_cell", nn.RNNCell(16, 32), (4, 16), 2),
]


@pytest.mark.parametrize("name,layer,shape,per_unit", RECURRENT, ids=[r[0] for r in RECURRENT])
@pytest.mark.parametrize("strategy", ["fx", "export", "dispatch"])
def test_recurrent_matmuls_equal_torch_counter(name, layer, shape, per_unit, strategy):
    x = torch.randn(*shape)
    result = analyze(Wrap(layer), x, strategy=strategy)
    (op,) = [x for x in result.layers if x.kind == "recurrent"]
    steps = x.numel() // shape[-1]  # tokens, whatever the layout
    layers_dirs = getattr(layer, "num_layers", 1) * (2 if getattr(layer, "bidirectional", False) else 1)
    gates = steps * layers_dirs * layer.hidden_size * per_unit
    assert op.flops - gates == torch_macs(layer, x)
    assert op.params == sum(p.numel() for p in layer.parameters())


def test_recurrent_language_model_through_cli(tmp_path, capsys):
    (tmp_path / "lm.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "class LM(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.embed = nn.Embedding(1000, 64)\n"
        "        self.rnn = nn.LSTM(64, 128, num_layers=2, batch_first=True)\n"
        "        self.head = nn.Linear(128, 1000)\n\n"
        "    def forward(self, tokens):\n"
        "        out, _ = self.rnn(self.embed(tokens))\n"
        "        return self.head(out)\n\n"
        "def example_inputs():\n"
        "    return (torch.randint(0, 1000, (2, 35)),)\n"
    )
    code = main([f"{tmp_path}/lm.py:LM", "--output-format", "json", "--select", "AL1"])
    data = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    (model,) = data["models"]
    assert model["totals"]["unknown_ops"] == 0
    lstm = next(layer for layer in model["layers"] if layer["kind"] == "recurrent")
    weights = 4 * 128 * (64 + 128) + 4 * 128 * (128 + 128)
    assert lstm["flops"] == 70 * (weights + 2 * 128 * 13)


def test_embedding_reads_rows_not_the_table():
    result = analyze(Wrap(nn.Embedding(50_000, 64)), torch.randint(0, 50_000, (2, 10)))
    (op,) = [x for x in result.layers if x.kind == "embedding"]
    assert op.flops == 0
    assert op.mac_bytes == 2 * 10 * 8 + 2 * (2 * 10 * 64 * 4)  # indices + rows read + output written


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    result = analyze(Wrap(nn.EmbeddingBag(1000, 16, mode=mode)), torch.randint(0, 1000, (4, 6)))
    (op,) = [x for x in result.layers if x.kind == "embedding"]
    assert op.flops == 4 * 6 * 16
    assert op.mac_bytes == 4 * 6 * 8 + 4 * 6 * 16 * 4 + 4 * 16 * 4


class Interp(nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, x):
        return F.interpolate(x, **self.kwargs)


@pytest.mark.parametrize(
    "kwargs,shape,per_out",
    [
        (dict(scale_factor=2, mode="nearest"), (1, 3, 8, 8), 1),
        (dict(scale_factor=2, mode="nearest-exact"), (1, 3, 8, 8), 1),
        (dict(scale_factor=2, mode="linear"), (1, 3, 8), 2),
        (dict(scale_factor=2, mode="bilinear"), (1, 3, 8, 8), 4),
        (dict(scale_factor=2, mode="bilinear", antialias=True), (1, 3, 8, 8), 4),
        (dict(scale_factor=2, mode="bicubic"), (1, 3, 8, 8), 16),
        (dict(scale_factor=2, mode="trilinear"), (1, 3, 4, 4, 4), 8),
    ],
)
@pytest.mark.parametrize("strategy", ["fx", "export", "dispatch"])
def test_interpolate_modes(kwargs, shape, per_out, strategy):
    x = torch.randn(*shape)
    result = analyze(Interp(**kwargs), x, strategy=strategy)
    out = Interp(**kwargs)(x).numel()
    assert result.totals.flops == out * per_out


def test_interpolate_area_is_adaptive_pooling():
    result = analyze(Interp(size=(5, 5), mode="area"), torch.randn(1, 3, 10, 10))
    assert result.totals.flops == 3 * 10 * 10


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_interpolate_equals_fvcore(mode):
    from fvcore.nn import FlopCountAnalysis

    model, x = Interp(scale_factor=2, mode=mode).eval(), torch.randn(1, 3, 16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            fv = FlopCountAnalysis(model, x)
            fv.unsupported_ops_warnings(False)
            expected = fv.total()
        finally:
            logging.disable(logging.NOTSET)
    assert expected > 0 and analyze(model, x).totals.flops == expected


class Patches(nn.Module):
    def forward(self, x):
        cols = F.unfold(x, 3, padding=1)  # im2col: a copy, 9x the input
        return F.fold(cols, x.shape[-2:], 3, padding=1) + x.unfold(2, 2, 2).sum()


@pytest.mark.parametrize("strategy", ["fx", "export", "dispatch"])
def test_unfold_fold(strategy):
    x = torch.randn(1, 2, 8, 8)
    result = analyze(Patches(), x, strategy=strategy)
    (im2col,) = [x for x in result.layers if "unfold" in x.op or "im2col" in x.op if x.kind == "copy"]
    cols = 2 * 9 * 64
    assert im2col.flops == 0 and im2col.mac_bytes == (2 * 64 + cols) * 4
    (col2im,) = [x for x in result.layers if ("fold" in x.op and "unfold" not in x.op) or "col2im" in x.op]
    assert col2im.kind == "reduction" and col2im.flops == cols


class Encoder(nn.Module):
    def __init__(self, no_grad: bool = False):
        super().__init__()
        self.no_grad = no_grad
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2)
        self.dec = nn.TransformerDecoderLayer(32, 4, 64, batch_first=True)

    def forward(self, x):
        with torch.set_grad_enabled(not self.no_grad):
            memory = self.enc(x)
        return self.dec(x, memory)


@pytest.mark.parametrize("no_grad", [False, True])
def test_transformer_layers_same_flops_whatever_the_path(no_grad):
    x = torch.randn(2, 10, 32)
    totals = {s: analyze(Encoder(no_grad), x, strategy=s).totals.flops for s in ("export", "dispatch")}
    # 3 self/cross attention blocks + 1 (the decoder has two), 3 FFNs, batch 2; norms, adds and relu on top
    e, length, ffn = 32, 10, 64
    block = 4 * length * e * e + 2 * length * length * e
    assert totals["dispatch"] >= 2 * (4 * block + 3 * 2 * length * e * ffn)


class TransposedWeight(nn.Module):
    """Falcon-style `x @ self.weight.T`: the dispatch recording sees aten.numpy_T (a view)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(12, 8))

    def forward(self, x):
        return x @ self.weight.T + x.mT.sum() + x.T.sum()


@pytest.mark.parametrize("strategy", [None, "export", "dispatch"])
def test_transpose_views_are_known(strategy):
    result = analyze(TransposedWeight(), torch.randn(4, 8), strategy=strategy)
    assert result.totals.flops >= 4 * 8 * 12


class WithLoss(nn.Module):
    """A forward that ends in its loss, as a Hugging Face model given labels does."""

    def __init__(self, loss):
        super().__init__()
        self.fc = nn.Linear(16, 10)
        self.loss = loss

    def forward(self, x, target):
        return self.loss(self.fc(x), target)


@pytest.mark.parametrize("strategy", ["fx", "export"])
@pytest.mark.parametrize(
    ("loss", "target"),
    [
        (F.cross_entropy, torch.randint(0, 10, (4,))),
        (nn.CrossEntropyLoss(), torch.randint(0, 10, (4,))),
        (F.mse_loss, torch.randn(4, 10)),
        (nn.BCEWithLogitsLoss(), torch.rand(4, 10)),
    ],
)
def test_a_loss_in_the_forward_is_one_pass_over_the_prediction(loss, target, strategy):
    """F.cross_entropy and the other losses had no cost formula (left out of the totals, "1 ops have
    no cost formula"): now one FLOP per element of the prediction, as a reduction; its MAC reads the
    prediction and the target."""
    result = analyze(WithLoss(loss), torch.randn(4, 16), target, strategy=strategy)
    (row,) = [x for x in result.layers if x.kind == "reduction"]
    prediction = 4 * 10
    assert row.flops == prediction
    assert row.mac_bytes == prediction * 4 + target.nbytes + 4  # the prediction, the target, a float32 scalar out
