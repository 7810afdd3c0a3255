"""The sentence (pair) classifier: processors (GLUE and custom tasks), features and their cache,
metrics, the task run_classifier.py runs, and the SavedModel export.
May import training, checkpoints, model, records, text and infrastructure; no other task.
"""
