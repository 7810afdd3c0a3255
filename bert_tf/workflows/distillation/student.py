"""The student's config and first weights, and the checks that the teacher can teach it.

Student shapes: a `bert_config.json` of its own (`--student_config`, e.g. TinyBERT-4: 4 layers,
hidden 312, 12 heads, intermediate 1200), or the teacher's config with fewer layers
(`--student_layers`), whose first weights are the teacher's: the embeddings, the pooler, the
task head and teacher layer `layer_map(...)[j]` for student layer j (DistilBERT initialises its
student from every second teacher layer the same way).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import keras

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.model.config import BertConfig
from bert_tf.workflows.distillation.losses import layer_map


def student_config(teacher: BertConfig, config_file: str | None,
                   num_layers: int | None) -> BertConfig:
    """The student's config: `config_file`'s, or the teacher's with `num_layers` layers.

    Raises:
      UserError: neither or both given; or a vocabulary size other than the teacher's (the
        student reads the teacher's input ids).
    """
    if (config_file is None) == (num_layers is None):
        raise UserError("give one of --student_config (a bert_config.json) and --student_layers "
                        "(the teacher's width, fewer layers)")
    if config_file is not None:
        config = BertConfig.from_json_file(config_file)
        source = config_file
    else:
        config = dataclasses.replace(teacher, num_hidden_layers=num_layers)
        source = f"--student_layers={num_layers}"
    layer_map(config.num_hidden_layers, teacher.num_hidden_layers)  # raises when it cannot map
    if config.vocab_size != teacher.vocab_size:
        raise UserError(f"{source}: vocab_size {config.vocab_size} differs from the teacher's "
                        f"{teacher.vocab_size}: teacher and student must share one vocabulary "
                        "(--vocab_file)")
    return config


def check_heads(student: BertConfig, teacher: BertConfig) -> None:
    """Attention distillation compares the scores head by head.

    Raises:
      UserError: the head counts differ.
    """
    if student.num_attention_heads != teacher.num_attention_heads:
        raise UserError(f"attention distillation needs the teacher's head count: the student has "
                        f"num_attention_heads={student.num_attention_heads}, the teacher "
                        f"{teacher.num_attention_heads}; give the student "
                        f"{teacher.num_attention_heads} heads or run --stages=prediction")


def check_same_vocabulary(vocab_file: str, other_vocab: str | None, source: str) -> None:
    """Raises UserError when `other_vocab` (a vocab.txt) holds other tokens than `vocab_file`."""
    if other_vocab is None:
        return
    ours = filesystem.read_text(vocab_file).split("\n")
    theirs = filesystem.read_text(other_vocab).split("\n")
    if [t.strip() for t in ours if t.strip()] != [t.strip() for t in theirs if t.strip()]:
        raise UserError(f"{other_vocab} ({source}) differs from --vocab_file={vocab_file}: teacher "
                        "and student must share one vocabulary; pass the teacher's vocab.txt as "
                        "--vocab_file")


def check_same_labels(teacher_labels: Sequence[str], student_labels: Sequence[str],
                      teacher_source: str, student_source: str) -> None:
    """Raises UserError when the label lists or their order differ (the teacher's output i
    would teach the student's output i another label)."""
    if list(teacher_labels) != list(student_labels):
        raise UserError(f"{student_source}: labels {list(student_labels)} differ from the "
                        f"teacher's {list(teacher_labels)} ({teacher_source}) in content or "
                        "order; give the data the teacher's label list in its order")


def copy_teacher_layers(student: keras.Model, teacher: keras.Model) -> None:
    """Copies the teacher's weights into a student of the teacher's width (the same model
    class): embeddings, pooler (where there is one) and head as they are, student layer j from
    teacher layer
    `layer_map(...)[j]`."""
    mapped = layer_map(student.config.num_hidden_layers, teacher.config.num_hidden_layers)
    s_encoder, t_encoder = student.encoder, teacher.encoder
    pairs = [(s_encoder.embeddings, t_encoder.embeddings)]
    if t_encoder.pooler is not None:  # ELECTRA has none: [CLS]'s vector is the pooled output
        pairs.append((s_encoder.pooler, t_encoder.pooler))
    pairs += [(s_encoder.transformer_layers[j], t_encoder.transformer_layers[i])
              for j, i in enumerate(mapped)]
    encoder_ids = {id(v) for v in s_encoder.weights} | {id(v) for v in t_encoder.weights}
    heads = ([v for v in student.weights if id(v) not in encoder_ids],
             [v for v in teacher.weights if id(v) not in encoder_ids])
    pairs_of_weights = [(a.weights, b.weights) for a, b in pairs] + [heads]
    for ours, theirs in pairs_of_weights:
        for variable, source in zip(ours, theirs, strict=True):
            variable.assign(source)
