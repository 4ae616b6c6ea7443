"""The training step per rank under data parallelism (`--train --world-size N --strategy ...`).

The single-process memory model (archlint.model.train.memory) records every storage of the steady
step on the meta device. A strategy does not change what the forward and backward compute on a
rank; it changes where the model states live and adds the buffers its collectives need. So the
recorded step is laid out again per rank (`layout`): parameters, gradients and optimizer state
resized as the strategy shards them, the all-gathered parameters of each unit made and freed where
FSDP2 (or ZeRO-3) makes and frees them, DDP's gradient buckets, the reduce-scatter and all-gather
buffers; the result is swept for its peak (and, on a GPU spec, replayed through the caching
allocator) exactly as the single step is. Every collective of the step is listed with its op,
phase, count and payload (`layout`), priced by the ring cost model on the spec's interconnect with
its overlap of the backward (`comm`). `plan` finds the fewest GPUs per strategy and the ranked
changes that fit, each verified by laying the step out again with the changes applied.
"""
