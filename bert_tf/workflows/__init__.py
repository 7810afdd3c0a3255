"""Workflows: what combines tasks, one layer above them (a task never imports another).

  multitask/   several fine-tuning tasks on one encoder (run_multitask.py)
"""
