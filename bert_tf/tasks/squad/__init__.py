"""SQuAD v1.1 / v2.0: examples, windows (`features`), records, post-processing, the official
metrics, and the task run_squad.py runs.
May import training, checkpoints, model, records, text and infrastructure; no other task.
"""
