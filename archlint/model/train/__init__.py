"""The training step: backward and optimizer costs, memory over the step, and whether a batch fits."""
