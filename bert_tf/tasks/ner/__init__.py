"""Token tagging (NER): run_ner.py's task and its export."""
