"""Tasks: one folder each (pretraining, classifier, squad, ner, multiple_choice, features)
holding its data, metrics, post-processing and the `task` module its script calls; beside them
what the fine-tuning families share (`finetuning`: the options every fine-tuning script has,
`EncoderTask`, the epochs' step count, results files), what a family declares (`family`) and
the one list of families (`families`).
May import serving (exports), training, checkpoints, model, records, text, infrastructure;
never another task.
"""
