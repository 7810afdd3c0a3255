"""Feature extraction: the per-token encoder layers extract_features.py writes (`extraction`)
and their raw-text SavedModel export (`export`).
May import serving, training, checkpoints, model, records, text and infrastructure; no other
task.
"""
