"""Contextual features (extract_features.py): extraction and its export."""
