"""`ModelFamily`: what a model family declares, in its own folder (`bert_tf.model.families` is
the one list of them)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

from bert_tf.model.config import BertConfig
from bert_tf.model.names import ATTRIBUTE, TF1, NameTable


@dataclasses.dataclass(frozen=True)
class ModelFamily:
    """What a model family declares.

    Attributes:
      name: as messages name it ("BERT", "ALBERT", "ELECTRA").
      config_class: its config (a BertConfig subclass, or BertConfig itself).
      encoder_class: its encoder (a BertEncoder subclass, or BertEncoder itself).
      config_file: the name its reference code's releases give the config beside a checkpoint
        (and the one bert_tf writes beside a checkpoint in that layout).
      claims: whether a config file's keys are this family's (the default family claims all).
      hf_model_type: the `model_type` of its Hugging Face `config.json`.
      config_from_hf: its config from a Hugging Face config.json's values (and the file, for
        errors), the activation translated to the family's name of the same function.
      hf_class_prefix: the start of its transformers classes' names ("Bert": BertModel, ...).
      hf_classifier_dropout_key: the Hugging Face config key of a classifier head's dropout.
      hf_export: whether `--export_hf_dir` writes this family (a message says why not).
      files_say_model_type: whether bert_tf's config files of this family say `model_type`
        (which otherwise marks a Hugging Face config.json, with `transformers_version`).
      legacy_activation_names: `hidden_act` names that earlier bert_tf versions read as another
        function than the family's reference code means: name → the function they were read as.
      names: its encoder's checkpoint names (TF1 ↔ attribute path ↔ Hugging Face), in the
        original's order.
      heads: the head classes (each declaring CHECKPOINT_NAMES) whose Hugging Face names its
        directories are read with.
      hf_prefix: what transformers puts before the encoder's names in a model with heads.
      hf_head_renames: the start of the heads' Hugging Face names (model/heads.py declares
        BertFor*'s) → where the family's transformers classes start them instead.
      hf_not_weights: the Hugging Face names that are buffers or tied copies, not weights.
      hf_tied_copies: a tied copy's Hugging Face name → the weight's, read from the copy when a
        file keeps only the copy.
      hf_encoder_names: the encoder's names for a Hugging Face directory holding these names
        (where they depend on which network it holds); None: `names`.
      checkpoint_kinds: (what to call it, pattern): encoder names (TF1 names or object paths)
        by which a checkpoint is this family's, most specific first.
      refuse_checkpoint: why a model of this family cannot take a checkpoint of the kind found
        (None: it can), from the kind (None: no family's), the checkpoint's names and its path.
      refuse_model: why a checkpoint of this family cannot fill another family's model, from
        the kind, that family and the path; None: the message every family shares.
      config_keys: how the family's config differs from the others (in that message).
      blocks_found: (pattern with the block index as group 1, sentence with `{count}`): how
        many blocks an incomplete checkpoint holds, said as the family's config would fix it.
    """

    name: str
    config_class: type
    encoder_class: type
    config_file: str
    claims: Callable[[Mapping[str, Any]], bool]
    hf_model_type: str
    config_from_hf: Callable[[Mapping[str, Any], str], BertConfig]
    hf_class_prefix: str
    hf_classifier_dropout_key: str = "classifier_dropout"
    hf_export: bool = True
    files_say_model_type: bool = False
    legacy_activation_names: Mapping[str, str] = dataclasses.field(default_factory=dict)
    names: NameTable = NameTable()
    heads: tuple[type, ...] = ()
    hf_prefix: str = ""
    hf_head_renames: Mapping[str, str] = dataclasses.field(default_factory=dict)
    hf_not_weights: re.Pattern = re.compile(r"position_ids$")
    hf_tied_copies: Mapping[str, str] = dataclasses.field(default_factory=dict)
    hf_encoder_names: Callable[[Iterable[str]], NameTable] | None = None
    checkpoint_kinds: tuple[tuple[str, re.Pattern], ...] = ()
    refuse_checkpoint: Callable[[str | None, Sequence[str], str], str | None] = (
        lambda kind, available, source: None)
    refuse_model: Callable[[str, "ModelFamily", str], str] | None = None
    config_keys: str = ""
    blocks_found: tuple[re.Pattern, str] = (re.compile(r"layer_(\d+)/"), "")

    def head_names(self, head: type) -> NameTable:
        """A head class's names, under the family's Hugging Face names for it."""
        return head.CHECKPOINT_NAMES.renamed_hf(self.hf_head_renames)

    def hf_names(self, hf_names: Iterable[str] = ()) -> NameTable:
        """Every name a Hugging Face directory of this family holding `hf_names` may have:
        the encoder's, then its heads'."""
        table = self.hf_encoder_names(hf_names) if self.hf_encoder_names else self.names
        for head in self.heads:
            table += self.head_names(head)
        return table

    def vocabulary_names(self) -> tuple[str, ...]:
        """The TF1 names of its weights with one row per vocabulary entry: the word embeddings,
        then its heads' (their `VOCABULARY_ROWS`: the masked-LM output bias)."""
        word, _ = self.names.translate("embeddings.word_embeddings", ATTRIBUTE, TF1)
        rows = (head.CHECKPOINT_NAMES.translate(path, ATTRIBUTE, TF1)[0]
                for head in self.heads for path in getattr(head, "VOCABULARY_ROWS", ()))
        return (word, *dict.fromkeys(rows))
