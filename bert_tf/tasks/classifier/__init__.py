"""The sentence (pair) classifier: processors (GLUE and custom tasks), features and their cache,
metrics, the task run_classifier.py runs, the SavedModel export, and `compat` (users'
DataProcessor classes written for the original, `--processor`).
May import serving, training, checkpoints, model, records, text and infrastructure; no other task.
"""
