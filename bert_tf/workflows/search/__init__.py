"""Hyper-parameter search: a fine-tuning command run over a grid of flag values (`bert-search`,
search.py). `grid` parses and expands the grid; `trials` runs each trial as a subprocess, reads
its dev metric and keeps trials.jsonl and best.json.
"""
