"""Checkpoints: the layout of a model's shards, their files, the room they need, the
checkpoint-only run and its session, and the checkpointer a training run calls.

Modules, one job each: ``layout`` (TP x PP x DP x ZeRO: each rank's files and tensors),
``files`` (torch.save or raw shards through the storage seam), ``space`` (room on the
target and what a failed write means), ``run`` (one rank's writes, eviction and reads in a
checkpoint-only run), ``session`` (that run end to end and its result), ``checkpointer``
(training-time checkpoints every N epochs or steps).
"""
