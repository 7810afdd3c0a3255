"""Token tagging (NER): readers and word-piece alignment (`data`), metrics, and the task run_ner.py
runs.
May import training, checkpoints, model, records, text and infrastructure; no other task.
"""
