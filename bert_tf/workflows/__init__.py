"""Workflows: what runs the fine-tuning scripts as a whole (a hyper-parameter search over many
runs, `search`). The top layer: may import tasks and everything below; nothing imports it.
"""
