"""bitsandbytes' 8-bit Adam/AdamW as the memory model sees it: the state it makes, no temporaries.

bitsandbytes is not needed (nor imported): what the memory model needs is the state's tensors,
read from `Optimizer2State.init_state` (bitsandbytes/optim/optimizer.py, the block-wise default):
a parameter of at least `min_8bit_size` (4096) elements keeps its two moments as uint8 tensors of
its shape, with one float32 absmax per block of 2048 elements for each, and the two 256-entry
float32 quantization maps, shared by every parameter; a smaller parameter keeps its moments in
float32. The update is one fused kernel per parameter, in place (`optimizer_update_8bit_blockwise`):
no temporaries, so the memory model's steady step runs no update (as for torch's fused optimizers).
"""

from __future__ import annotations

import torch

MIN_8BIT_SIZE = 4096
BLOCK = 2048
QMAP_ENTRIES = 256
BASIS = (
    "the step run with the state bitsandbytes' Adam8bit/AdamW8bit makes (bitsandbytes/optim/optimizer.py "
    f"Optimizer2State.init_state: uint8 moments and a float32 absmax per {BLOCK} elements for a parameter of "
    f"{MIN_8BIT_SIZE} elements or more, float32 moments below; two {QMAP_ENTRIES}-entry maps) and its fused "
    "in-place update (no temporaries)"
)


class EightBitAdam(torch.optim.Optimizer):
    """The state of bitsandbytes.optim.Adam8bit/AdamW8bit, made at the first step; the update is not
    computed (the memory model reads sizes, not values)."""

    def __init__(self, params, lr: float = 1e-3):
        super().__init__(params, {"lr": lr})
        self._qmaps: tuple[torch.Tensor, torch.Tensor] | None = None

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None or self.state[p]:
                    continue
                state = self.state[p]
                state["step"] = torch.zeros((), dtype=torch.float32)
                if p.numel() < MIN_8BIT_SIZE:
                    state["state1"] = torch.zeros_like(p, dtype=torch.float32)
                    state["state2"] = torch.zeros_like(p, dtype=torch.float32)
                    continue
                if self._qmaps is None:
                    self._qmaps = tuple(
                        torch.zeros(QMAP_ENTRIES, dtype=torch.float32, device=p.device) for _ in range(2)
                    )
                blocks = -(-p.numel() // BLOCK)
                state["state1"] = torch.zeros_like(p, dtype=torch.uint8)
                state["state2"] = torch.zeros_like(p, dtype=torch.uint8)
                state["qmap1"], state["qmap2"] = self._qmaps
                state["absmax1"] = torch.zeros(blocks, dtype=torch.float32, device=p.device)
                state["absmax2"] = torch.zeros(blocks, dtype=torch.float32, device=p.device)
