"""The sequence classification task."""
