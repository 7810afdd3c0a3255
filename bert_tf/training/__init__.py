"""Training: the one loop (`loop`), its compiled steps, the log and eval_results.txt, the scripts'
shared flags, distribution strategies and the options every fine-tuning task shares.
May import checkpoints, model, records, text and infrastructure; never a task.
"""
