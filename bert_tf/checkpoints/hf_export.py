"""Hugging Face directories out: a model of bert_tf as transformers' `from_pretrained` loads it.

`export_hf_directory(model, directory, tokenizer, ...)` writes, atomically (full_disk), on any
tf.io.gfile path:

  config.json        model_type, architectures, the sizes, hidden_act under transformers' name
                     (our "gelu" is its "gelu_new", our "gelu_exact" its "gelu"), dtype, and for
                     classifiers id2label / label2id / problem_type (multi-label: thresholds)
  model.safetensors  PyTorch layout (Linear weights [out, in]); the tied masked-LM decoder is
                     not written (transformers ties it to the word embeddings); float32 or bfloat16
  vocab.txt + tokenizer_config.json (BertTokenizer), or for a SentencePiece vocabulary
                     spiece.model + tokenizer.json + tokenizer_config.json (AlbertTokenizer;
                     tokenizer.json holds the same pieces, scores and normalisation table in
                     the form the tokenizers library reads without protobuf)
  crf_transitions.json  a CRF tagger's transition, start and end scores (docs/checkpoints.md)

Names come from the family's one name table (the Hugging Face name of each entry of the name map,
`name_map.model_mappings`): each name written is translated back through the reading side
(`hf_weights.tf1_name`) and must give the TF1 name it came from, so a directory written here is
read back bit for bit.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from typing import Callable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.text import tokenizers
from bert_tf.checkpoints import hf_weights, model_config
from bert_tf.checkpoints.name_map import find_encoder, init_from_checkpoint, model_mappings
from bert_tf.errors import UserError
from bert_tf.model import families, heads, models
from bert_tf.model.families import build_encoder
from bert_tf.model.config import HF_ACTIVATIONS, BertConfig, name_of_activation

TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
TOKENIZER_JSON_FILE = "tokenizer.json"
VOCAB_FILE = "vocab.txt"
SPM_FILE = "spiece.model"  # the name AlbertTokenizer looks for
CRF_FILE = "crf_transitions.json"
PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")
# --export_hf_dtype → (safetensors dtype, TensorFlow dtype the float32 weights are rounded to).
DTYPES = {"float32": ("F32", tf.float32), "bfloat16": ("BF16", tf.bfloat16)}


@dataclasses.dataclass(frozen=True)
class ExportHead:
    """A head `bert-export-hf --head` writes: its name there, the model holding it, built from
    (config, number of labels, crf), and whether its outputs are labels (the classifier's and
    the tagger's: the labels must be known). Task families declare theirs
    (`TaskFamily.export_head`)."""

    name: str
    build: Callable[[BertConfig, int, bool], keras.Model]
    labelled: bool = False


PRETRAINING_HEAD = ExportHead("pretraining", lambda config, labels, crf: models.pretraining_model(
    config))
CLASSIFIER_HEAD = ExportHead("classifier", lambda config, labels, crf: models.classifier_model(
    config, labels), labelled=True)
TAGGER_HEAD = ExportHead("tagger", lambda config, labels, crf: models.token_classifier_model(
    config, labels, crf=crf), labelled=True)
SPAN_HEAD = ExportHead("squad", lambda config, labels, crf: models.span_model(config))
ENCODER_HEAD = ExportHead("encoder", lambda config, labels, crf: build_encoder(config))
# The heads of BERT's own models (model/models.py), in bert-export-hf's order; a task family
# whose model lives in its folder adds its own (export_hf.py).
HEADS = {head.name: head for head in (PRETRAINING_HEAD, CLASSIFIER_HEAD, TAGGER_HEAD, SPAN_HEAD,
                                      ENCODER_HEAD)}
RUN_LABEL_LIST = "label_list.txt"  # what a fine-tuning run writes beside its checkpoints
LSTM_REFUSAL = ("--export_hf_dir: the BiLSTM between the encoder and the tag scores "
                "(--lstm_size) has no place in transformers' BertForTokenClassification; export a "
                "tagger trained without --lstm_size")


class HfExportError(UserError):
    """A model (or option) that a Hugging Face directory cannot express."""


@dataclasses.dataclass(frozen=True)
class TokenizerFiles:
    """The run's tokenizer: a WordPiece `vocab_file` or a SentencePiece `spm_model_file`."""

    vocab_file: str | None = None
    spm_model_file: str | None = None
    do_lower_case: bool = True
    max_seq_length: int = 512


@dataclasses.dataclass(frozen=True)
class HeadLabels:
    """What a classifier's outputs mean: `labels` in output order (None: transformers' LABEL_i),
    `problem_type` (one of PROBLEM_TYPES) and, multi-label, `thresholds` (one or one per label)."""

    labels: Sequence[str] | None = None
    problem_type: str | None = None
    thresholds: float | Sequence[float] | None = None


def architecture(model) -> str:
    """transformers' class for `model`: BertForPreTraining, AlbertForQuestionAnswering, BertModel..."""
    family = families.family_of(find_encoder(model).config)
    return family.hf_class_prefix + _declared(model, "HF_CLASS_SUFFIX", "Model")


def _declared(model, name: str, default):
    """What `model`'s class declares for Hugging Face (models._EncoderModel); an encoder alone
    declares nothing: BertModel, with its pooler."""
    return getattr(type(model), name, default)


def hf_state_dict(model) -> dict[str, np.ndarray]:
    """`model`'s weights under transformers' names in PyTorch layout (float32 numpy arrays).

    Raises:
      HfExportError: the model has a part transformers' class lacks (a BiLSTM tagger), or is
        ELECTRA's (not written yet).
    """
    if getattr(model, "lstm", None) is not None:
        raise HfExportError(LSTM_REFUSAL)
    family = families.family_of(find_encoder(model).config)
    if not family.hf_export:
        raise HfExportError("--export_hf_dir does not write ELECTRA models yet: export them in "
                            "google-research/electra's layout (--export_google_checkpoint, "
                            "docs/electra.md)")
    table = family.hf_names()
    prefix = "" if model is find_encoder(model) else family.hf_prefix
    keep_pooler = _declared(model, "HF_KEEPS_POOLER", True)
    weights = {}
    for mapping in model_mappings(model):
        if not keep_pooler and "/pooler/" in f"/{mapping.name}":
            continue
        name, transpose = mapping.hf_name, mapping.transpose
        back = hf_weights.tf1_name(name, family, table) if name else (None, False)
        if back != (mapping.name, transpose):  # the two directions disagree: a bug, not bad input
            raise AssertionError(f"{mapping.name} → {name} → {back}")
        value = np.asarray(mapping.variable.numpy(), np.float32)
        weights[(prefix if mapping.in_encoder else "") + name] = value.T if transpose else value
    return weights


def hf_config(model, head: HeadLabels = HeadLabels(), dtype: str = "float32") -> dict:
    """config.json's values for `model` (see the module docstring)."""
    config: BertConfig = find_encoder(model).config
    family = families.family_of(config)
    values = {"model_type": family.hf_model_type,
              "architectures": [architecture(model)], "dtype": dtype,
              **{key: value for key, value in config.to_dict().items() if key != "hidden_act"},
              "hidden_act": name_of_activation(HF_ACTIVATIONS, config.activation),
              "layer_norm_eps": config.layer_norm_eps,
              "position_embedding_type": "absolute", "pad_token_id": 0}
    for key in ("net_structure_type", "gap_size", "down_scale_factor", "num_memory_blocks"):
        values.pop(key, None)  # google-research/albert's options at their only value
    # Our classifier and tagger heads drop 10% of their input in training, whatever the config.
    values[family.hf_classifier_dropout_key] = heads.CLASSIFIER_DROPOUT
    labels_head = _declared(model, "HF_LABELS_HEAD", None)
    if labels_head is not None:
        values.update(_label_values(int(getattr(model, labels_head).output_weights.shape[0]),
                                    head, _declared(model, "HF_PROBLEM_TYPE", False)))
    return values


def _label_values(num_outputs: int, head: HeadLabels, sequence: bool) -> dict:
    """id2label, label2id and (sequence classifiers) problem_type and thresholds."""
    problem_type = head.problem_type or ("regression" if num_outputs == 1 and sequence
                                         else "single_label_classification")
    if problem_type not in PROBLEM_TYPES:
        raise HfExportError(f"problem_type {problem_type!r}: transformers knows "
                            f"{', '.join(PROBLEM_TYPES)}")
    labels = list(head.labels) if head.labels else [f"LABEL_{i}" for i in range(num_outputs)]
    if len(labels) != num_outputs:
        raise HfExportError(f"{len(labels)} labels ({', '.join(labels)}) for a head of "
                            f"{num_outputs} outputs: give the labels the model was trained with")
    values = {"id2label": {str(i): label for i, label in enumerate(labels)},
              "label2id": {label: i for i, label in enumerate(labels)}}
    if sequence:
        values["problem_type"] = problem_type
    if problem_type == "multi_label_classification":
        thresholds = np.broadcast_to(np.asarray(
            0.5 if head.thresholds is None else head.thresholds, np.float64), [num_outputs])
        values["thresholds"] = {label: float(t) for label, t in zip(labels, thresholds)}
    return values


def tokenizer_files(tokenizer: TokenizerFiles) -> dict[str, str | bytes]:
    """The vocabulary and tokenizer_config.json that make AutoTokenizer give our ids."""
    settings = {"do_lower_case": tokenizer.do_lower_case,
                "model_max_length": tokenizer.max_seq_length,
                "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]",
                "clean_up_tokenization_spaces": False,
                # The segment ids are an input of every model here (AlbertTokenizer leaves them out).
                "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]}
    if tokenizer.spm_model_file:
        model = filesystem.read_bytes(tokenizer.spm_model_file)
        pieces = tokenizers.SentencePieceTokenizer(tokenizer.spm_model_file).sp_model
        # Our SentencePiece tokenizer lower-cases (when asked) and leaves accents to the model's
        # own normalisation: AlbertTokenizer does the same with keep_accents.
        settings.update(tokenizer_class="AlbertTokenizer", keep_accents=True, remove_space=True,
                        unk_token=pieces.id_to_piece(pieces.unk_id()),
                        pad_token=pieces.id_to_piece(max(pieces.pad_id(), 0)),
                        bos_token="[CLS]", eos_token="[SEP]")
        files = {SPM_FILE: model, TOKENIZER_JSON_FILE: _unigram_tokenizer_json(pieces, model)}
    elif tokenizer.vocab_file:
        files = {VOCAB_FILE: filesystem.read_text(tokenizer.vocab_file)}
        # BasicTokenizer strips accents exactly when it lower-cases: strip_accents None does.
        settings.update(tokenizer_class="BertTokenizer", unk_token="[UNK]", pad_token="[PAD]",
                        tokenize_chinese_chars=True, strip_accents=None)
    else:
        raise HfExportError("a Hugging Face export needs the tokenizer: give --vocab_file or "
                            "--spm_model_file")
    files[TOKENIZER_CONFIG_FILE] = json.dumps(settings, indent=2, sort_keys=True) + "\n"
    return files


def _unigram_tokenizer_json(pieces, model: bytes) -> str:
    """tokenizer.json for the SentencePiece model: its pieces and scores, its normalisation
    table, and the [CLS] a [SEP] b [SEP] template (AlbertTokenizer's own pipeline is built
    around them: lower-casing per tokenizer_config.json, whitespace split, "▁" prefix)."""
    ids = {name: pieces.piece_to_id(name) for name in ("[CLS]", "[SEP]")}
    template = {"single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                         {"Sequence": {"id": "B", "type_id": 1}},
                         {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                "special_tokens": {name: {"id": name, "ids": [i], "tokens": [name]}
                                   for name, i in ids.items()}}
    charsmap = base64.b64encode(_precompiled_charsmap(model)).decode("ascii")
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                 "split": True}
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": {"type": "Precompiled", "precompiled_charsmap": charsmap},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                                                metaspace]},
        "post_processor": {"type": "TemplateProcessing", **template},
        "decoder": metaspace,
        "model": {"type": "Unigram", "unk_id": pieces.unk_id(), "byte_fallback": False,
                  "vocab": [[pieces.id_to_piece(i), pieces.get_score(i)]
                            for i in range(pieces.get_piece_size())]}}, ensure_ascii=False)


def _precompiled_charsmap(model: bytes) -> bytes:
    """ModelProto.normalizer_spec (field 3).precompiled_charsmap (field 2), read from the
    protobuf wire format directly (the generated classes need one protobuf release)."""
    def fields(data: bytes):
        position = 0
        while position < len(data):
            key, position = _varint(data, position)
            number, wire_type = key >> 3, key & 7
            if wire_type == 0:
                value, position = _varint(data, position)
            elif wire_type == 2:
                size, position = _varint(data, position)
                value, position = data[position:position + size], position + size
            else:  # fixed 64 or 32 bits
                size = 8 if wire_type == 1 else 4
                value, position = data[position:position + size], position + size
            yield number, value

    spec = next((value for number, value in fields(model) if number == 3), b"")
    return next((value for number, value in fields(spec) if number == 2), b"")


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        value, position, shift = value | (byte & 0x7F) << shift, position + 1, shift + 7
        if byte < 0x80:
            return value, position


def crf_file(model, labels: Sequence[str] | None) -> dict[str, str]:
    """{CRF_FILE: JSON} for a CRF tagger (transitions[i][j]: tag j after tag i), else {}."""
    crf = getattr(model, "crf", None)
    if crf is None:
        return {}
    scores = {name: value.numpy().tolist() for name, value in crf.scores().items()}
    return {CRF_FILE: json.dumps({"labels": list(labels or []), **scores}, indent=1) + "\n"}


def write_safetensors(path: str, weights: Mapping[str, np.ndarray], dtype: str) -> None:
    """Writes `weights` as a safetensors file (8-byte header length, JSON header, raw data) in
    `dtype`, rounding float32 to bfloat16 as TensorFlow's cast does (to nearest, ties to even)."""
    code, tf_dtype = DTYPES[dtype]
    item_size = tf_dtype.size
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in sorted(weights):
        size = int(np.prod(weights[name].shape)) * item_size
        header[name] = {"dtype": code, "shape": list(weights[name].shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with filesystem.atomic_output(path) as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for name in sorted(weights):
            f.write(np.ascontiguousarray(tf.cast(weights[name], tf_dtype).numpy()).tobytes())


def export_hf_directory(model, directory: str, tokenizer: TokenizerFiles,
                        head: HeadLabels = HeadLabels(), dtype: str = "float32") -> str:
    """Writes `model` as a Hugging Face directory (module docstring), replacing its files.

    Args:
      model: a BertEncoder (AlbertEncoder) or a model of model/models.py, weights loaded.
      directory: the output directory (local or any tf.io.gfile path).
      tokenizer: the vocabulary and casing the model was trained with.
      head: what a classifier's or tagger's outputs mean.
      dtype: "float32" or "bfloat16".

    Returns:
      directory.

    Raises:
      HfExportError: a model or option transformers cannot express (one line saying which).
    """
    if dtype not in DTYPES:
        raise HfExportError(f"--export_hf_dtype={dtype}: expected one of {', '.join(DTYPES)}")
    weights = hf_state_dict(model)
    files = {**tokenizer_files(tokenizer), **crf_file(model, head.labels),
             hf_weights.CONFIG_FILE: json.dumps(hf_config(model, head, dtype), indent=2) + "\n"}

    # config.json last: a reader that finds it finds the weights beside it.
    with filesystem.atomic_files(directory, order=lambda name: (name == hf_weights.CONFIG_FILE, name)) as tmp:
        write_safetensors(filesystem.join(tmp, hf_weights.WEIGHTS_FILE), weights, dtype)
        for name, content in files.items():
            filesystem.write_atomically(filesystem.join(tmp, name), content)
    logging.info("exported %d weights as transformers' %s (%s) to %s", len(weights),
                 architecture(model), dtype, directory)
    return directory


def export_checkpoint(init_checkpoint: str, directory: str, tokenizer: TokenizerFiles,
                      head: str = "pretraining", labels: Sequence[str] | None = None,
                      problem_type: str | None = None, bert_config_file: str | None = None,
                      crf: bool = False, dtype: str = "float32",
                      heads: Mapping[str, ExportHead] = HEADS) -> str:
    """Exports any checkpoint bert_tf reads (bert-export-hf): a run directory, Google's TF1
    layout, ALBERT's, a Hugging Face directory.

    Args:
      head: a key of `heads`: which of the checkpoint's heads to write with the encoder.
      labels: the classifier's or tagger's labels; default the run's label_list.txt beside the
        checkpoint, or a Hugging Face directory's id2label.
      problem_type: the classifier's (PROBLEM_TYPES); default single-label, or regression for one
        output.
      crf: the tagger was trained with --crf (its transitions go to crf_transitions.json).
      heads: the heads by name (HEADS and the task families' own: export_hf.py).

    Raises:
      HfExportError: the checkpoint holds no trained `head`, or its labels are unknown.
    """
    if head not in heads:
        raise HfExportError(f"--head={head}: expected one of {', '.join(heads)}")
    export_head = heads[head]
    config = model_config.resolve_model_config(bert_config_file, init_checkpoint)
    labels = model_config.checkpoint_labels(labels, init_checkpoint, "--label_list") or \
        _run_labels(init_checkpoint)
    if export_head.labelled and not labels and problem_type != "regression":
        raise HfExportError(f"--head={head}: give --label_list (no {RUN_LABEL_LIST} beside "
                            f"{init_checkpoint} and no id2label in a config.json)")
    num_labels = 1 if problem_type == "regression" else len(labels or ())
    model = export_head.build(config, num_labels, crf)
    report = init_from_checkpoint(model, init_checkpoint)
    untrained = [name for name in report.missing + report.mismatched if "pooler" not in name]
    if untrained:
        raise HfExportError(f"{init_checkpoint} holds no trained {head} head of this shape "
                            f"({', '.join(untrained[:3])} not loaded): pick the --head (and "
                            f"--label_list) it was trained with")
    return export_hf_directory(model, directory, tokenizer,
                               HeadLabels(labels, problem_type), dtype)


def _run_labels(init_checkpoint: str) -> list[str] | None:
    """The label_list.txt of the run directory holding `init_checkpoint`, if any."""
    directory = init_checkpoint if filesystem.isdir(init_checkpoint) else \
        os.path.dirname(init_checkpoint)
    path = os.path.join(directory, RUN_LABEL_LIST)
    if not filesystem.exists(path):
        return None
    with filesystem.open_text(path) as f:
        return [line.rstrip("\n") for line in f if line.strip()] or None
