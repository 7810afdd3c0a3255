"""Task distillation (TinyBERT's two stages, DistilBERT's layer copy) over the classifier, NER
and SQuAD tasks: the losses and layer map (`losses`), the student's config and first weights
(`student`), the teacher-student loop task (`task`) and the run that run_distillation.py calls
(`run`). See docs/distillation.md.
"""
