"""Columns of TSV/CSV task files, given by 0-based index or by header name (the classifier's
custom tasks and create_pretraining_data.py's --text_columns)."""

from __future__ import annotations

from typing import Sequence

from bert_tf.errors import UserError

Column = int | str  # an index (0-based) or, for files with a header row, a column name


def parse_column(value: str) -> Column:
    """A flag's column: digits are a 0-based index, anything else a header name."""
    return int(value) if value.strip().isdigit() else value


def resolve_column(column: Column | None, header: Sequence[str] | None, path: str,
                   role: str) -> int | None:
    """The 0-based index of `column` in a file with `header` (None: no header row); `role` names
    the column's use in the messages ("label", "text_a", ...)."""
    if column is None or isinstance(column, int):
        return column
    if header is None:
        raise UserError(f"{path}: the {role} column is given by name ('{column}') but the file "
                        "has no header row; give a 0-based index instead")
    if column not in header:
        raise UserError(f"{path}:1: no column named '{column}' for the {role}; "
                        f"the header has {list(header)}")
    return list(header).index(column)
