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

`augmented_options` has the task family write its files with each training example followed by
its variants (`TaskFamily.augment`: the classifier's custom-task TSV files) and returns the
options that read them.
"""

from __future__ import annotations

import random
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import model_config, name_map
from bert_tf.errors import UserError
from bert_tf.model import models
from bert_tf.tasks.family import TaskFamily, TextVariants
from bert_tf.text.fast_basic import CJK_RANGES
from bert_tf.text.tokenizers import FullTokenizer
from bert_tf.tasks.finetuning import FinetuningOptions

Candidates = Callable[[Sequence[str]], list[list[str]]]


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


def text_variants(candidates: Candidates, words_of: Callable[[str], list[str]], copies: int,
                  probability: float, seed: int) -> TextVariants:
    """An example's texts → its `copies` variants (`augment_text` on each text, None kept),
    drawn from random.Random seeded by `seed` and the example's index."""
    def variants(texts: Sequence[str | None], index: int) -> list[tuple[str | None, ...]]:
        rng = random.Random(f"{seed}:{index}")
        varied = [[None] * copies if text is None else
                  augment_text(text, words_of, candidates, copies, probability, rng)
                  for text in texts]
        return list(zip(*varied))
    return variants


def augmented_options(family: TaskFamily, options: FinetuningOptions, directory: str,
                      make_candidates: Callable[[], MaskedLmCandidates], copies: int,
                      probability: float, seed: int, settings: dict) -> FinetuningOptions:
    """`options` reading the family's augmented copy of the task's files in `directory`
    (`family.augment`): kept as written when made with the same `settings` (the masked LM is
    then never loaded), else written again."""
    def make_variants() -> TextVariants:
        candidates = make_candidates()
        return text_variants(candidates, candidates.words, copies, probability, seed)

    return family.augment(options, directory, make_variants, settings)
