"""Measured time on the device at hand: the one timer, per-op and end-to-end latency, paired judgements."""
