"""Which config describes the model: --bert_config_file, or the one the checkpoint brings.

`--bert_config_file` stays the original's flag and wins when given. Without it, the config comes
from `--init_checkpoint`:

- an original Google directory (or its `bert_model.ckpt` prefix): `bert_config.json` beside it
  (`albert_config.json` for google-research/albert's, `electra_config.json` for ELECTRA);
- a bert_tf run directory (or one of its `ckpt-N` prefixes): the `bert_config.json` the run wrote;
- a Hugging Face directory: its `config.json`, translated (HF "gelu" is the erf form, our
  "gelu_exact"; "gelu_new"/"gelu_pytorch_tanh" are our "gelu").

A Hugging Face config.json given as --bert_config_file is translated the same way: it is told
from a bert_config.json by the keys transformers writes into every config (`model_type`,
`transformers_version`), which Google's and bert_tf's files never hold.

An ELECTRA config's "gelu" is google-research/electra's, the erf form; bert_tf writes that function
as "gelu_exact". A bare "gelu" in a bert_tf run directory (or the google_checkpoint/ it exports)
was written before that and means the tanh form it was trained with (`legacy_activation`).

A fine-tuning run that predicts from its own `--output_dir` finds the config that run wrote there.
Checkpoint and config that disagree on shapes stop when the weights load
(`checkpoints.shape_mismatch_message`).
"""

from __future__ import annotations

import os
import re
from typing import Sequence

from absl import logging

from bert_tf import filesystem
from bert_tf.checkpoints import hf_weights
from bert_tf.checkpoints.files import holds_bert_tf_checkpoint
from bert_tf.errors import MissingFileError, UserError
from bert_tf.model import families
from bert_tf.model.family import ModelFamily
from bert_tf.model.config import BertConfig, read_config_json

HF_CONFIG_KEYS = ("model_type", "transformers_version")  # in every config transformers writes


def checkpoint_labels(labels: Sequence[str] | None, init_checkpoint: str | None, flag: str
                      ) -> list[str] | None:
    """The head's label names: `labels` when given, else those a Hugging Face --init_checkpoint
    brings (config.json's id2label; None when it names none).

    Raises:
      UserError: `labels` given and not the directory's (names or order): its head was trained
        on the directory's, and another list would mislabel every prediction.
    """
    brought = (hf_weights.label_names(init_checkpoint)
               if init_checkpoint and hf_weights.is_hf_directory(init_checkpoint) else None)
    if labels and brought is not None and list(labels) != brought:
        raise UserError(f"{flag}={','.join(labels)} differs from the id2label of "
                        f"{init_checkpoint}/config.json ({','.join(brought)}), the labels its head "
                        f"was trained on in that order: give those (or leave {flag} out)")
    return list(labels) if labels else brought


def load_model_config(path: str | os.PathLike) -> BertConfig:
    """Reads a `bert_config.json`, an ALBERT `albert_config.json` or an `electra_config.json`:
    the one place that decides.

    Returns:
      the config class of the family that claims the file's keys (`families.family_of_values`):
      an `ElectraConfig` when the file says `"model_type": "electra"`, an `AlbertConfig` when it
      has ALBERT keys (`embedding_size`, `num_hidden_groups`, ...), else a BertConfig (all are
      BertConfig subclasses); `hidden_act` as `legacy_activation` reads it.
    """
    values = read_config_json(path)
    family = families.family_of_values(values)
    values = legacy_activation(values, family, os.fspath(path))
    return family.config_class._from_file_values(values, path)


def legacy_activation(values: dict, family: ModelFamily, path: str) -> dict:
    """A config's values, with a `hidden_act` that an earlier bert_tf read as another function
    than the family's reference code means (ELECTRA's bare "gelu", read as the tanh form until it
    meant google's erf form) read as the function the run was trained with.

    bert_tf writes those functions by other names now (ELECTRA: "gelu_exact", "gelu_tanh"), so
    such a name beside a bert_tf checkpoint (in the run directory, or in the google_checkpoint/
    that such a run exports) can only be an earlier bert_tf's. Anywhere else it is the user's,
    as the reference code means it.
    """
    trained_with = family.legacy_activation_names.get(values.get("hidden_act"))
    if trained_with is None:
        return values
    directory = filesystem.dirname(filesystem.absolute(path))
    if not any(holds_bert_tf_checkpoint(place)
               for place in (directory, filesystem.dirname(directory)) if place):
        return values
    logging.warning("%s: an %s config written by bert_tf before its %r meant the reference code's "
                    "function; read as the one the run was trained with (%r)", path, family.name,
                    values["hidden_act"], trained_with)
    return {**values, "hidden_act": trained_with}


def load_config_file(path: str) -> BertConfig:
    """A model config JSON in bert_config.json's layout: BERT, or ALBERT by its keys."""
    return load_model_config(path)


def translate_hf_config(path: str) -> BertConfig:
    """A Hugging Face config.json (or its directory) as our config (the one place to dispatch on
    its model_type)."""
    return hf_weights.bert_config_from_hf(path)


def is_hf_config(path: str, found_by_name: bool = False) -> bool:
    """Whether a model config file is a Hugging Face config.json (to be translated).

    Args:
      path: the config file.
      found_by_name: True when it was found as `config.json` beside a checkpoint.
    """
    if found_by_name and os.path.basename(path) == hf_weights.CONFIG_FILE:
        return True
    values = read_config_json(path)
    if (families.family_of_values(values).files_say_model_type
            and "transformers_version" not in values):
        return False  # e.g. bert_tf's electra_config.json: our activation names, not transformers'
    return any(key in values for key in HF_CONFIG_KEYS)


def _checkpoint_directory(init_checkpoint: str) -> str:
    """The directory of a checkpoint given as a directory, a prefix or one of its files."""
    path = re.sub(r"\.(index|meta|data-\d{5}-of-\d{5})$", "", os.fspath(init_checkpoint))
    return path if filesystem.isdir(path) else filesystem.dirname(path)


def config_source(bert_config_file: str | None, init_checkpoint: str | None = None,
                  output_dir: str | None = None) -> str:
    """The file that describes the model, in the order of the module docstring.

    Raises:
      MissingFileError: no --bert_config_file and no config beside the checkpoint.
    """
    if bert_config_file:
        return bert_config_file
    for directory in (_checkpoint_directory(init_checkpoint) if init_checkpoint else None,
                      output_dir):
        if not directory:
            continue
        for name in (*families.config_files(), hf_weights.CONFIG_FILE):
            if filesystem.isfile(os.path.join(directory, name)):
                return os.path.join(directory, name)
    where = f" ({init_checkpoint} has neither bert_config.json nor config.json)" \
        if init_checkpoint else ""
    raise MissingFileError(f"--bert_config_file is required unless --init_checkpoint is a "
                           f"directory or prefix with bert_config.json (Google, bert_tf) or "
                           f"config.json (Hugging Face) beside it{where}")


def resolve_model_config(bert_config_file: str | None, init_checkpoint: str | None = None,
                         output_dir: str | None = None, max_seq_length: int | None = None
                         ) -> BertConfig:
    """The model's config from --bert_config_file or what --init_checkpoint brings.

    Args:
      bert_config_file: the flag's value; None to take the checkpoint's config.
      init_checkpoint: a checkpoint directory or prefix, a bert_tf run or a Hugging Face directory.
      output_dir: the run's own directory, last resort (a config written by an earlier run).
      max_seq_length: when given, the config must hold sequences this long.

    Raises:
      MissingFileError: no config found; ConfigError: the config found is not valid;
      UserError: max_seq_length is longer than max_position_embeddings.
    """
    path = config_source(bert_config_file, init_checkpoint, output_dir)
    if is_hf_config(path, found_by_name=not bert_config_file):
        config = translate_hf_config(path)
    else:
        config = load_config_file(path)
    if max_seq_length is not None and max_seq_length > config.max_position_embeddings:
        raise UserError(f"--max_seq_length={max_seq_length} is longer than the model's "
                        f"max_position_embeddings={config.max_position_embeddings} ({path})")
    return config
