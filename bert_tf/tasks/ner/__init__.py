"""Token tagging (NER): readers and word-piece alignment (`data`), metrics, the task run_ner.py
runs, and its raw-text SavedModel export (`export`).
May import serving, training, checkpoints, model, records, text and infrastructure; no other
task.
"""
