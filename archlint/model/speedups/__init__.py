"""--what-if: the standard PyTorch speed-ups (autocast, channels_last, BatchNorm folding,
torch.compile, int8 dynamic quantization, inference_mode) applied to a copy of the model and
timed end to end against it. `run.what_ifs` measures them (imports torch); `links` prices the
findings whose fix is one of them (as the rules declare: FIXED_BY, PRICED_BY_WHAT_IF)."""
