"""The I/O layer: every file operation of bert_tf, for local paths and `scheme://` paths (gs://,
s3://, hdfs://; ram:// in tests).

- `paths`: the path API (join, exists, isdir, glob, listdir, open_read, read_text, copy, ...):
  local paths through `os`, scheme paths through their backend.
- `writer`: the one writer; every output appears whole under its name (`atomic_output`,
  `write_atomically`, `atomic_directory`, `atomic_files`).
- `inputs`: the input files a flag names (globs, directories) and the UTF-8 check.
- `backends`: `tf.io.gfile` and Apache Beam's `FileSystems`, and which one a scheme goes to.
- `full_disk`: a full disk while writing, as one error naming the output.

The rule: no module outside this package calls `tf.io.gfile` (only `backends` does;
tests/test_import_contracts.py checks it), so that a file system is added or changed here
alone. TensorFlow's own readers and writers of its formats stay where they are used:
`tf.train.latest_checkpoint` and `tf.train.CheckpointManager`, `tf.data.TFRecordDataset`,
`tf.io.TFRecordWriter`, `tf.saved_model` and the summary writers open their files through
TensorFlow's file systems, the very ones `tf.io.gfile` reaches, so a path they take works
exactly where the layer's calls do.

`from bert_tf import filesystem` gives the layer's functions below; `filesystem.full_disk` the
full-disk error. The package imports only `bert_tf.errors` from bert_tf, and TensorFlow or Beam
only when a scheme path needs them.
"""

from bert_tf.filesystem import full_disk
from bert_tf.filesystem.backends import check_path, prefer_beam, scheme
from bert_tf.filesystem.inputs import check_text_encoding, expand_input_patterns
from bert_tf.filesystem.paths import (absolute, basename, copy, delete, delete_any, delete_tree,
                                      dirname, exists, glob, isdir, isfile, join, list_files,
                                      listdir, makedirs, open_read, open_text, open_write,
                                      read_bytes, read_text, readable, replace, size, stat)
from bert_tf.filesystem.writer import (TEMPORARY_NAME, AtomicFile, atomic_directory, atomic_files,
                                       atomic_output, recover_interrupted_write, temporary_beside,
                                       write_atomically, writing)

__all__ = [
    "full_disk",
    "check_path", "prefer_beam", "scheme",
    "check_text_encoding", "expand_input_patterns",
    "absolute", "basename", "copy", "delete", "delete_any", "delete_tree", "dirname", "exists",
    "glob", "isdir", "isfile", "join", "list_files", "listdir", "makedirs", "open_read",
    "open_text", "open_write", "read_bytes", "read_text", "readable", "replace", "size", "stat",
    "TEMPORARY_NAME", "AtomicFile", "atomic_directory", "atomic_files", "atomic_output",
    "recover_interrupted_write", "temporary_beside", "write_atomically", "writing",
]
