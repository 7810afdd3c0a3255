"""Pretraining: create_pretraining_data's instances, masking (static, dynamic, n-gram), input,
output, pipeline and `beam/`; run_pretraining's task (its eval metrics included).
May import training, checkpoints, model, records, text and infrastructure; no other task.
"""
