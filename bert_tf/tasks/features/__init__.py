"""Feature extraction: the per-token encoder layers extract_features.py writes (`extraction`).
May import training, checkpoints, model, records, text and infrastructure; no other task.
"""
