"""The sentence (pair) classifier: processors (GLUE and custom tasks), features and their cache,
metrics (and `multi_label`: thresholds and metrics of multi-label tasks), the task
run_classifier.py runs, the SavedModel export, and `compat` (users' DataProcessor classes
written for the original, `--processor`).
May import serving, training, checkpoints, model, records, text and infrastructure; no other task.
"""
