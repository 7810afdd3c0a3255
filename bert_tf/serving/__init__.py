"""What every export shares: the original's tokenization and packing as TensorFlow ops, the ops
TensorFlow Serving registers, and writing a SavedModel. May import model/, text and the
tokenizers; tasks' `export.py` modules build their signatures on it."""
