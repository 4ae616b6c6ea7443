"""Memory over a training step (archlint.model.train.memory): small models whose step memory is
counted by hand, in bytes (float32: 4 bytes an element)."""

import json

import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from archlint.errors import UsageError
from archlint.model.train.memory import step_memory

F = 4  # bytes per float32


def mlp(inplace=False):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(inplace=inplace), nn.Linear(16, 4))


X = torch.randn(5, 8)
PARAMS = (16 * 8 + 16 + 4 * 16 + 4) * F  # 848
RELU_OUT = 5 * 16 * F  # saved: ReLU's backward and the second Linear's grad-weight read it
LOSS = F  # the scalar loss, alive at the end of the forward
# The model's output, kept by the loop's `out` through backward and the optimizer step (and the
# previous step's through the next forward, until `out = model(x)` rebinds it)
OUT = 5 * 4 * F


def test_mlp_adam_by_hand():
    r = step_memory(mlp(), (X,), optimizer="adam")
    assert r["params_bytes"] == PARAMS
    assert r["grads_bytes"] == PARAMS
    assert r["optimizer_bytes"] == 2 * PARAMS + 4 * F  # exp_avg, exp_avg_sq; one float32 step per parameter
    assert r["inputs_bytes"] == 5 * 8 * F
    assert r["activations_bytes"] == RELU_OUT + OUT + LOSS
    assert r["per_module_activations"] == {"1": RELU_OUT, "2": OUT, "<model>": LOSS}
    assert r["output_bytes"] == OUT and "previous step's `out`" in r["output_basis"]
    # Peak: in the step, at the first weight (16×8): everything persistent, all gradients, and
    # Adam's two per-parameter temporaries (sqrt(v) and its division) of that weight, and the
    # output the loop's `out` still holds.
    assert r["peak_bytes"] == PARAMS + PARAMS + (2 * PARAMS + 4 * F) + 5 * 8 * F + 2 * 16 * 8 * F + OUT
    assert r["at"].startswith("step: ")
    assert sum(r["at_peak"].values()) == r["peak_bytes"]
    assert r["timeline"] and max(b for _, b in r["timeline"]) == r["peak_bytes"]
    assert json.loads(json.dumps(r)) == r  # JSON-ready


def test_sgd_has_no_state_and_momentum_one_buffer():
    assert step_memory(mlp(), (X,), optimizer="sgd")["optimizer_bytes"] == 0
    assert step_memory(mlp(), (X,), optimizer="sgd-momentum")["optimizer_bytes"] == PARAMS


def test_foreach_and_fused_temporaries():
    single = step_memory(mlp(), (X,), optimizer="adam")
    foreach = step_memory(mlp(), (X,), optimizer="adam-foreach")
    fused = step_memory(mlp(), (X,), optimizer="adam-fused")
    assert single["optimizer_bytes"] == foreach["optimizer_bytes"] == fused["optimizer_bytes"]
    # foreach takes sqrt(v) of every parameter at once (one parameter-sized list); fused has none
    assert foreach["at_peak"]["temporaries"] == PARAMS
    assert fused["peak_bytes"] < single["peak_bytes"]
    assert fused["first_step_peak_bytes"] == single["first_step_peak_bytes"]


def test_frozen_layer_has_no_grad_nor_state():
    model = mlp()
    model[0].requires_grad_(False)
    r = step_memory(model, (X,), optimizer="adam")
    trained = (4 * 16 + 4) * F
    assert r["params_bytes"] == PARAMS  # frozen weights still live on the device
    assert r["grads_bytes"] == trained
    assert r["optimizer_bytes"] == 2 * trained + 2 * F
    assert r["activations_bytes"] == RELU_OUT + OUT + LOSS


def test_inplace_relu_counted_once():
    # The in-place ReLU writes into the first Linear's output: the one storage is saved (by
    # ReLU's backward and the second Linear), counted once; the out-of-place forward holds both
    # outputs for a moment, so its forward peak is higher.
    plain = step_memory(mlp(), (X,), optimizer="sgd")
    inplace = step_memory(mlp(inplace=True), (X,), optimizer="sgd")
    assert inplace["activations_bytes"] == plain["activations_bytes"] == RELU_OUT + OUT + LOSS
    persistent = PARAMS + 5 * 8 * F  # SGD: no state; the previous gradients were freed by zero_grad
    # the previous step's output is alive through the forward, until the model returns
    assert plain["forward_peak_bytes"] == persistent + OUT + 2 * RELU_OUT  # Linear's output and ReLU's
    assert inplace["forward_peak_bytes"] == persistent + RELU_OUT + 2 * OUT  # one, then this output and the last


class Block(nn.Module):
    def __init__(self, ckpt):
        super().__init__()
        self.ckpt = ckpt
        self.body = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 8))

    def forward(self, x):
        return checkpoint(self.body, x, use_reentrant=False) if self.ckpt else self.body(x)


def test_checkpoint_keeps_only_block_inputs():
    def model(ckpt):
        torch.manual_seed(0)
        return nn.Sequential(Block(ckpt), Block(ckpt))

    x = torch.randn(200, 8)  # activations outweigh the weights
    plain = step_memory(model(False), (x,), optimizer="sgd")
    ckpt = step_memory(model(True), (x,), optimizer="sgd")
    hidden, block_out = 200 * 64 * F, 200 * 8 * F
    # Without: each block's ReLU output, and the second block's input (the first's output).
    assert plain["activations_bytes"] == 2 * hidden + 2 * block_out + LOSS  # and the output
    # With: only the second block's input; the hidden activations are recomputed in backward.
    assert ckpt["activations_bytes"] == 2 * block_out + LOSS
    assert ckpt["peak_bytes"] < plain["peak_bytes"]
    assert ckpt["ops"] > plain["ops"]  # the recomputation


def test_meta_model_and_inputs_allocate_nothing():
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096))
        x = torch.empty(64, 4096)
    r = step_memory(model, (x,), optimizer="adamw")
    assert r["params_bytes"] == 2 * (4096 * 4096 + 4096) * F
    assert r["basis"].startswith("measured on the meta device")


def test_data_dependent_model_falls_back_to_real_tensors_and_says_so():
    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            y = self.lin(x)
            return y * 2 if y.sum().item() > -1e9 else y

    r = step_memory(Gate(), (X,), optimizer="sgd")
    assert "real tensors" in r["basis"] and "meta" in r["basis"]
    assert r["params_bytes"] == (64 + 8) * F


def test_unknown_optimizer_is_a_usage_error():
    with pytest.raises(UsageError, match=r"adam\[-foreach\|-fused\]"):
        step_memory(mlp(), (X,), optimizer="lion")


def test_the_loops_output_is_kept_through_backward_and_into_the_next_forward():
    # An LM head in small: the output (the logits) is as large as what backward makes. The loop
    # `out = model(x); loss = f(out); loss.backward(); opt.step()` keeps `out` through backward (and
    # the last step's `out` until the model returns): issue 46, where dropping it cost 20% on an LLM.
    torch.manual_seed(0)
    head = nn.Linear(16, 4096, bias=False)
    x = torch.randn(8, 16)
    r = step_memory(head, (x,), optimizer="sgd")
    weight, inputs, logits = 16 * 4096 * F, 8 * 16 * F, 8 * 4096 * F
    assert r["output_bytes"] == logits
    # the forward's end: this step's logits and the last step's, both alive until the model returns
    assert r["forward_peak_bytes"] == weight + inputs + 2 * logits
    # backward's mm: the weight, the input, the logits `out` keeps, their gradient and the weight's
    # (and the scalar loss and its gradient)
    assert r["peak_bytes"] == weight + inputs + logits + logits + weight + 2 * F
    assert r["at"].startswith("backward")


def test_one_loss_for_the_flops_and_the_memory():
    # a Hugging Face LM in train mode returns its KV cache beside the logits: the FLOP graph's loss
    # read the cache's tensors too, the memory model's only the logits (issue 46); now both read all
    transformers = pytest.importorskip("transformers")
    import archlint
    from archlint.model.train.memory import output_tensors

    cfg = transformers.LlamaConfig(
        vocab_size=1000,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).train()
    ids = torch.randint(0, 1000, (2, 16))
    read = output_tensors(model(input_ids=ids))
    assert len(read) == 1 + 2 * 2  # the logits, a key and a value per layer
    loss = archlint.analyze(model, {"input_ids": ids}, train=True, quiet=True).to_dict()["models"][0]["totals"][
        "train"
    ]["loss"]
    assert loss["outputs"] == len(read)
    assert loss["forward_flops"] == sum(t.numel() for t in read) + len(read) - 1


class _OwnLoss(nn.Module):
    """A classifier that returns its own loss beside the logits, as a Hugging Face model given
    labels does; `detached`: the logits returned without a gradient (the loss then reads only the
    loss, whatever the rule)."""

    def __init__(self, detached=False):
        super().__init__()
        torch.manual_seed(0)
        self.head, self.detached = nn.Linear(16, 4096), detached

    def forward(self, x, y):
        logits = self.head(x)
        loss = nn.functional.cross_entropy(logits, y)
        return {"loss": loss, "logits": logits.detach() if self.detached else logits}


def test_a_model_that_returns_its_own_loss_is_trained_on_it_alone():
    # `out = model(**batch); out.loss.backward()`: the loop backpropagates the model's own loss, not
    # the mean of every output added to it (which made a logits-sized gradient more: archlint 1.14x
    # the real peak on an LLM given labels, benchmarks/train_memory.py). The logits `out` keeps stay
    # alive either way (a detached view shares their storage), so both models step alike.
    x, y = torch.randn(8, 16), torch.randint(0, 4096, (8,))
    own = step_memory(_OwnLoss(), (x, y), optimizer="sgd")
    detached = step_memory(_OwnLoss(detached=True), (x, y), optimizer="sgd")
    assert own["peak_bytes"] == detached["peak_bytes"]
    assert own["loss"].startswith("the loss the model returns itself")
    assert detached["loss"].startswith("the loss the model returns itself")


@pytest.mark.parametrize("use_cache", [False, True])  # with a cache, export sees the output reduced to its tensors
def test_the_flops_loss_is_the_models_own_where_it_returns_one(use_cache):
    # given labels, a Hugging Face LM returns its loss first: the step's FLOPs count that one loss
    # (its cross-entropy is in the forward), as the memory model does, not a mean over the logits too
    transformers = pytest.importorskip("transformers")
    import archlint

    cfg = transformers.LlamaConfig(
        vocab_size=1000,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        use_cache=use_cache,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).train()
    ids = torch.randint(0, 1000, (2, 16))
    batch = {"input_ids": ids, "labels": ids}
    result = archlint.analyze(model, batch, train=True, quiet=True).to_dict()["models"][0]
    train = result["totals"]["train"]
    assert train["loss"]["outputs"] == 1
    # said once, as what the step runs: no "mean of the outputs" beside it (the text and the HTML say the same)
    assert train["loss"]["name"] == "own"
    step_note = next(n for n in result["notes"] if n.startswith("training step (--train)"))
    assert "loss the model's own" in step_note and "of the outputs" not in step_note
    assert train["loss"]["forward_flops"] == 1  # the mean of the scalar loss
    memory = step_memory(model, (), batch, optimizer="sgd")
    assert memory["loss"].startswith("the loss the model returns itself")


@pytest.mark.parametrize("strategy", ["fx", "export", "dispatch"])
def test_every_capture_marks_the_models_own_loss(strategy):
    from archlint.model.capture import capture
    from archlint.model.train import grad

    x, y = torch.randn(8, 16), torch.randint(0, 4096, (8,))
    model = _OwnLoss()
    graph, _ = capture(model, (x, y), strategy)
    sources = grad.propagate(graph, model)
    assert len(sources) == 1
    assert graph.nodes[sources[0]]["out_shapes"][0] in ([], ())  # the scalar loss, not the logits
