"""archlint's GEMM multiply-adds on Hugging Face models against torch's FlopCounterMode.

    python benchmarks/hf_flops.py

The zoo of tests/model/test_hf_zoo.py (small configs: BERT, GPT-2, Llama, Mixtral, T5, ViT,
Whisper, CLIP), built with real weights; FlopCounterMode runs one real forward and counts 2 per
multiply-add on mm/bmm/addmm/conv. Printed per model: archlint's GEMM multiply-adds (linear,
matmul, attention, conv) × 2 over FlopCounterMode's total; the same without attention and the
mixture-of-experts grouped GEMMs, which FlopCounterMode does not count on the CPU (it has no formula
for `_scaled_dot_product_flash_attention_for_cpu` or `_grouped_mm`); archlint over the hand formula
(tests/model/test_hf_zoo.py); archlint's analysis time (a busy shared machine: noisy). 1.000 is
agreement.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "model"))
logging.getLogger("transformers").setLevel(logging.ERROR)

import test_hf_zoo as zoo  # noqa: E402

from archlint.model.analyze import analyze_model  # noqa: E402


def main() -> None:
    print(
        f"{'model':10} {'archlint×2 / FCM':>17} {'same, FCM-counted ops':>22} {'archlint / hand':>16} {'analysis s':>11}"
    )
    for name, make in zoo.ZOO.items():
        torch.manual_seed(0)
        cls, config, inputs, hand = make()
        model = cls(config).eval()
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(**inputs)
        start = time.perf_counter()
        _, result = analyze_model(model, (), kwargs=inputs)
        seconds = time.perf_counter() - start
        gemm = sum(layer.flops for layer in result.layers if layer.kind in zoo.GEMM)
        counted = sum(
            layer.flops
            for layer in result.layers
            if layer.kind in zoo.GEMM and layer.kind != "attention" and "grouped_mm" not in layer.op
        )
        total = counter.get_total_flops()
        print(f"{name:10} {2 * gemm / total:>17.3f} {2 * counted / total:>22.3f} {gemm / hand:>16.3f} {seconds:>11.2f}")


if __name__ == "__main__":
    main()
