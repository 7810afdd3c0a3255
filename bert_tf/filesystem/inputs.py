"""The input files a flag names: globs and directories expanded (`expand_input_patterns`), and the
check that a text file is UTF-8 (`check_text_encoding`); errors name the flag and the file.
"""

from __future__ import annotations

import glob as _glob
from typing import Sequence

from bert_tf.errors import MissingFileError, UnreadableFileError, UserError
from bert_tf.filesystem.backends import check_path
from bert_tf.filesystem.paths import glob, isdir, list_files, readable


# Byte-order marks of the encodings that UTF-8 decoding would turn into other text; UTF-32's come
# first (UTF-32-LE's starts with UTF-16-LE's).
_WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32-LE"), (b"\x00\x00\xfe\xff", "UTF-32-BE"),
              (b"\xff\xfe", "UTF-16-LE"), (b"\xfe\xff", "UTF-16-BE"))


def check_text_encoding(path: str, head: bytes, flag: str) -> None:
    """Raises `UserError` if a text file's first bytes say UTF-16 or UTF-32 rather than UTF-8.

    A UTF-16/32 byte-order mark, or NUL bytes (ASCII text in UTF-16/32 without a mark), mean the
    text would be decoded as other words (UTF-8 decoding drops or garbles them without an error).

    Args:
      path: the file, named in the message.
      head: its first bytes (a few KB are enough).
      flag: the flag that named the file.
    """
    encoding = next((name for bom, name in _WIDE_BOMS if head.startswith(bom)), None)
    if encoding is None and b"\x00" in head:
        encoding = "UTF-16 or UTF-32 (it holds NUL bytes)"
    if encoding is not None:
        raise UserError(f"{flag}: {path}: the text is {encoding}, not UTF-8; convert it first, "
                        f"e.g. iconv -f UTF-16 -t UTF-8 {path} > {path}.utf8")


def expand_input_patterns(patterns: str | Sequence[str]) -> list[str]:
    """Comma-separated globs and directories (local or `scheme://`) -> sorted regular files;
    errors name the pattern."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",")]
    files: list[str] = []
    for pattern in (p.strip() for p in patterns):
        if not pattern:
            continue
        check_path(pattern, "--input_file")
        if isdir(pattern):
            found = list_files(pattern)
            if not found:
                raise MissingFileError(f"--input_file: directory {pattern} holds no files")
        else:
            found = glob(pattern)
            if not found:
                what = "no file matches" if _glob.has_magic(pattern) else "file not found:"
                raise MissingFileError(f"--input_file: {what} {pattern}")
        files.extend(found)
    if not files:
        raise MissingFileError("--input_file: no input files given")
    for path in files:
        if not readable(path):
            raise UnreadableFileError(f"--input_file: {path} is not readable "
                                      "(check its permissions)")
    return files

