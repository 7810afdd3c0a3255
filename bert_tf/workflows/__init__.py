"""Workflows: what combines tasks, one layer above them (`distillation/`: a fine-tuned teacher
into a smaller student, through any task's run function; `multitask/`: several fine-tuning tasks
on one encoder, run_multitask.py).
May import tasks and everything below them; no task imports a workflow.
"""
