"""Workflows: what combines tasks or runs them as a whole, one layer above them
(`distillation/`: a fine-tuned teacher into a smaller student, through any task's run function;
`multitask/`: several fine-tuning tasks on one encoder, run_multitask.py; `search/`: a
fine-tuning command over a grid of hyper-parameters, bert-search).
May import tasks and everything below them; no task imports a workflow.
"""
