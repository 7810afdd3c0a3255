"""Training: the one loop (`loop`), its compiled steps, the log and eval_results.txt, the scripts'
shared flags, distribution strategies, the options every fine-tuning task shares, evaluation
during training (`best_checkpoint`: the best checkpoint, early stopping), the optimizers
(`optimizers`: AdamW, LAMB, the warm-up schedule) and `optimizer_compat` (the original
optimization.py's names; the `bert_tf.optimization` facade re-exports both).
May import checkpoints, model, records, text and infrastructure; never a task.
"""
