"""Tasks: one folder each (pretraining, classifier, squad, ner, features) holding its data,
metrics, post-processing and the `task` module its script calls.
May import serving (exports), training, checkpoints, model, records, text, infrastructure;
never another task.
"""
