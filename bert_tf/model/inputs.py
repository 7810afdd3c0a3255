"""The encoder's three inputs, by name: what every model reads, every task's records hold and
every export feeds it (int32 [batch, sequence] each)."""

# Token ids, 1 on real tokens and 0 on padding, and the segment (0: first text, 1: second).
MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids")
