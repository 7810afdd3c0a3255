"""Training: the one loop (`loop`), its compiled steps, the log and eval_results.txt, the scripts'
shared flags, distribution strategies, the options every fine-tuning task shares, and
evaluation during training (`best_checkpoint`: the best checkpoint, early stopping).
May import checkpoints, model, records, text and infrastructure; never a task.
"""
