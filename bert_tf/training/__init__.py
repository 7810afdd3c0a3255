"""Training: the one loop (`loop`), its compiled steps, the log and eval_results.txt, distribution
strategies (`distribution`; TF_CONFIG read by `cluster`), evaluation during training (`best_checkpoint`: the best checkpoint, early stopping), the
optimizers (`optimizers`: AdamW, LAMB, the warm-up schedule) and `optimizer_compat` (the original
optimization.py's names; the `bert_tf.optimization` facade re-exports both). The scripts' flags
are `bert_tf.cli.flags`.
May import checkpoints, model, records, text and infrastructure; never a task.
"""
