"""Measured time on the device at hand: the one timer, per-op and end-to-end latency, the device's
roofline peaks (measured, cached), paired judgements."""
