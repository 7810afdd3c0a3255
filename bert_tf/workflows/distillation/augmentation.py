"""Data augmentation for distillation (TinyBERT's `data_augmentation.py` idea): more training
text for the student, labelled by the teacher's soft outputs.

Each training example is kept and gets `copies` variants: every word (every character of
Chinese, which BasicTokenizer splits per character) is replaced with probability `probability`
by one of the `top_k` words a pretrained BERT's masked LM predicts when that word is masked in
its sentence (whole words only: no `##` pieces, no special tokens, not the word itself; TinyBERT
takes GloVe neighbours for words of several pieces, here the masked LM predicts them too). The
candidates of a sentence come from one batch, a row per masked word; the choices from
random.Random seeded by the seed and the example's index, so the same seed writes the same
bytes.

`augment_classifier_data` writes the task's train (augmented), dev and test examples as a
custom task's TSV files (`run_classifier.py --task_name=custom` layout, the task's labels in
their order) and returns the spec the classifier reads them with.
"""

from __future__ import annotations

import json
import os
import random
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from bert_tf import filesystem
from bert_tf.checkpoints import model_config, name_map
from bert_tf.errors import UserError
from bert_tf.model import models
from bert_tf.tasks.classifier import processors as classification
from bert_tf.text.fast_basic import CJK_RANGES
from bert_tf.text.tokenizers import FullTokenizer

Candidates = Callable[[Sequence[str]], list[list[str]]]
SETTINGS_FILE = "augmentation.json"


def _is_cjk(word: str) -> bool:
    return len(word) == 1 and any(lo <= ord(word) <= hi for lo, hi in CJK_RANGES)


def join_words(words: Sequence[str]) -> str:
    """Words back into text: spaces between them, none between two CJK characters."""
    text = ""
    for i, word in enumerate(words):
        if i and not (_is_cjk(word) and _is_cjk(words[i - 1])):
            text += " "
        text += word
    return text


class MaskedLmCandidates:
    """The top-k whole-word predictions of a pretrained masked LM for each word of a sentence.

    Raises:
      UserError: the checkpoint has no masked-LM head.
    """

    def __init__(self, checkpoint: str, vocab_file: str, do_lower_case: bool, top_k: int = 15,
                 max_seq_length: int = 128):
        config = model_config.resolve_model_config(None, checkpoint)
        self.model = models.pretraining_model(config)
        report = name_map.init_from_checkpoint(self.model, checkpoint)
        head = [name for name in report.missing + report.mismatched if "predictions" in name]
        if head:
            raise UserError(f"--augment_checkpoint={checkpoint}: no masked-LM head "
                            f"({', '.join(head)} missing); give a pretrained BERT checkpoint "
                            "with cls/predictions")
        self.tokenizer = FullTokenizer(vocab_file, do_lower_case=do_lower_case)
        vocab = self.tokenizer.inv_vocab
        # Whole words only: no sub-word pieces, no [CLS]/[unused0]-style entries.
        self.allowed = np.array([not (vocab[i].startswith("##") or vocab[i].startswith("["))
                                 for i in range(len(vocab))] + [False] * max(
            0, config.vocab_size - len(vocab)))
        self.top_k, self.max_seq_length = top_k, max_seq_length
        self._call = tf.function(lambda features: self.model(features)["masked_lm_logits"],
                                 reduce_retracing=True)

    def words(self, text: str) -> list[str]:
        return self.tokenizer.basic_tokenizer.tokenize(text)

    def __call__(self, words: Sequence[str]) -> list[list[str]]:
        if not words:
            return []
        vocab = self.tokenizer.vocab
        pieces = [self.tokenizer.wordpiece_tokenizer.tokenize(word) for word in words]
        rows, positions = [], []
        for i in range(len(words)):
            before = [p for word in pieces[:i] for p in word]
            after = [p for word in pieces[i + 1:] for p in word]
            tokens = (["[CLS]"] + before + ["[MASK]"] + after)[:self.max_seq_length - 1] + ["[SEP]"]
            rows.append([vocab[t] for t in tokens])
            positions.append(min(len(before) + 1, self.max_seq_length - 1))
        width = max(map(len, rows))
        ids = np.zeros((len(rows), width), np.int32)
        for r, row in enumerate(rows):
            ids[r, :len(row)] = row
        logits = self._call({"input_ids": tf.constant(ids),
                             "input_mask": tf.constant((ids > 0).astype(np.int32)),
                             "segment_ids": tf.zeros_like(ids),
                             "masked_lm_positions": tf.constant(
                                 np.array(positions, np.int32)[:, None])}).numpy()[:, 0]  # [W,V]
        out = []
        for i, word in enumerate(words):
            if positions[i] >= self.max_seq_length - 1:  # the mask fell past the window
                out.append([])
                continue
            ranked = np.argsort(-np.where(self.allowed[:logits.shape[1]], logits[i], -np.inf))
            chosen = [self.tokenizer.inv_vocab[j] for j in ranked[:self.top_k + 1]
                      if self.allowed[j]]
            out.append([c for c in chosen if c != word][:self.top_k])
        return out


def augment_text(text: str, words_of: Callable[[str], list[str]], candidates: Candidates,
                 copies: int, probability: float, rng: random.Random) -> list[str]:
    """`copies` variants of `text`, each word replaced with `probability` by a candidate."""
    words = words_of(text)
    options = candidates(words)
    return [join_words([rng.choice(options[i]) if options[i] and rng.random() < probability
                        else word for i, word in enumerate(words)]) for _ in range(copies)]


def augment_examples(examples: Sequence[classification.InputExample],
                     words_of: Callable[[str], list[str]], candidates: Candidates, copies: int,
                     probability: float, seed: int) -> list[classification.InputExample]:
    """Each example, followed by its `copies` variants (text_a and text_b both varied)."""
    out = []
    for index, example in enumerate(examples):
        rng = random.Random(f"{seed}:{index}")
        variants_a = augment_text(example.text_a, words_of, candidates, copies, probability, rng)
        variants_b = ([None] * copies if example.text_b is None else
                      augment_text(example.text_b, words_of, candidates, copies, probability, rng))
        out.append(example)
        out.extend(classification.InputExample(f"{example.guid}-aug{c}", a, b, example.label)
                   for c, (a, b) in enumerate(zip(variants_a, variants_b)))
    return out


def _label_cell(task: classification.TaskSpec, label) -> str:
    if task.multi_label:
        return task.label_separator.join(label)
    return "" if label is None else str(label)


def _write_split(path: str, task: classification.TaskSpec,
                 examples: Sequence[classification.InputExample], pair: bool) -> None:
    header = "text_a\t" + ("text_b\t" if pair else "") + "label\n"
    lines = [f"{e.text_a}\t" + (f"{e.text_b or ''}\t" if pair else "")
             + _label_cell(task, e.label) + "\n" for e in examples]
    filesystem.write_atomically(path, header + "".join(lines))


def augment_classifier_data(task: classification.TaskSpec, data_dir: str, output_dir: str,
                            make_candidates: Callable[[], MaskedLmCandidates], copies: int,
                            probability: float, seed: int, settings: dict) -> dict:
    """Writes output_dir/{train,dev,test}.tsv (train augmented) and returns their custom spec;
    reuses them when output_dir/augmentation.json holds the same `settings` (the masked LM is
    then never loaded)."""
    splits = {split: classification.read_examples(task, data_dir, split)
              for split in ("train", "dev", "test")
              if tf.io.gfile.exists(os.path.join(data_dir, task.splits[split].filename))}
    pair = any(e.text_b is not None for examples in splits.values() for e in examples)
    spec = {"text_a": "text_a", "label": "label", "labels": list(task.labels or []),
            "regression": task.regression, "metrics": list(task.metrics), "name": task.name}
    if pair:
        spec["text_b"] = "text_b"
    if task.multi_label:
        spec = {**spec, "multi_label": True, "label_separator": task.label_separator}
        del spec["metrics"]
    if task.regression:
        del spec["labels"]
    settings_path = os.path.join(output_dir, SETTINGS_FILE)
    if tf.io.gfile.exists(settings_path):
        with tf.io.gfile.GFile(settings_path) as f:
            if json.load(f) == settings:
                return spec
    tf.io.gfile.makedirs(output_dir)
    candidates = make_candidates()
    for split, examples in splits.items():
        if split == "train":
            examples = augment_examples(examples, candidates.words, candidates, copies,
                                        probability, seed)
        _write_split(os.path.join(output_dir, f"{split}.tsv"), task, examples, pair)
    filesystem.write_atomically(settings_path, json.dumps(settings, sort_keys=True))
    return spec
