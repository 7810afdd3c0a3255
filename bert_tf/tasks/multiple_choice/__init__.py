"""Multiple choice (SWAG): which of N endings continues a context. Reading, packing, the
loop task, the raw-text export and the family's declaration."""
