"""Texts longer than one sequence: which pieces a single text keeps (`--truncation`), or the
windows it is split into (`--long_text=chunks`).

Sun et al. 2019 ("How to Fine-Tune BERT for Text Classification?") compare keeping the head,
the tail, or the head and the tail of a long text (their best at 512: the first 128 and the
last 382 pieces), and splitting it into windows whose logits are pooled (mean or max). The
classifier's features (`tasks/classifier/features.py`) use these functions, and its raw-text
export (`bert_tf.serving.long_text`) does the same with ops, so that both keep the same pieces.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence, TypeVar

from bert_tf.errors import UserError

TRUNCATIONS = ("head", "tail", "head+tail")
LONG_TEXT_MODES = ("truncate", "chunks")
POOLINGS = ("mean", "max")
DEFAULT_HEAD_TOKENS = 128

Piece = TypeVar("Piece")


@dataclasses.dataclass(frozen=True)
class LongText:
    """How a single text longer than `max_seq_length - 2` pieces becomes features.

    mode "truncate": one row with the pieces `truncation` keeps; "head+tail" keeps the first
    `head_tokens` and the last `max_seq_length - 2 - head_tokens`.
    mode "chunks": windows of `max_seq_length - 2` pieces whose starts are `stride` apart
    (None: the window length, no overlap); the windows' logits are pooled per text (`pooling`).
    Sentence pairs are always cut the original's way (longest first).
    """

    mode: str = "truncate"
    truncation: str = "head"
    head_tokens: int = DEFAULT_HEAD_TOKENS
    stride: int | None = None
    pooling: str = "mean"

    @property
    def chunks(self) -> bool:
        return self.mode == "chunks"

    @property
    def is_default(self) -> bool:
        """The original's behaviour (keep the head): records of earlier runs stay valid."""
        return not self.chunks and self.truncation == "head"

    def check(self, max_seq_length: int, pair: bool) -> None:
        """Raises UserError naming the flag when the options cannot apply."""
        if self.mode not in LONG_TEXT_MODES:
            raise UserError(f"--long_text={self.mode}: use one of {', '.join(LONG_TEXT_MODES)}")
        if self.truncation not in TRUNCATIONS:
            raise UserError(f"--truncation={self.truncation}: use one of {', '.join(TRUNCATIONS)}")
        if self.pooling not in POOLINGS:
            raise UserError(f"--chunk_pooling={self.pooling}: use one of {', '.join(POOLINGS)}")
        if pair and not self.is_default:
            raise UserError(f"--truncation={self.truncation} --long_text={self.mode}: this task "
                            "has sentence pairs, which are cut longest first as the original "
                            "does; use --truncation=head --long_text=truncate (the defaults)")
        if self.chunks and self.truncation != "head":
            raise UserError(f"--long_text=chunks keeps every piece: drop --truncation="
                            f"{self.truncation}")
        window = max_seq_length - 2
        if self.truncation == "head+tail" and not 0 <= self.head_tokens <= window:
            raise UserError(f"--truncation_head_tokens={self.head_tokens}: must be in 0.."
                            f"{window} (max_seq_length - 2 pieces per row)")
        if self.chunks and self.stride is not None and not 1 <= self.stride <= window:
            raise UserError(f"--chunk_stride={self.stride}: must be in 1..{window} "
                            f"(max_seq_length - 2, the window's pieces), else pieces are skipped")

    def kept_head(self, window: int) -> int:
        """Pieces kept from the start of a text longer than `window` (the rest from its end)."""
        return {"head": window, "tail": 0, "head+tail": self.head_tokens}[self.truncation]

    def window_stride(self, window: int) -> int:
        return self.stride or window


def truncate(pieces: Sequence[Piece], window: int, long_text: LongText) -> list[Piece]:
    """The pieces of a single text kept in one row of `window` pieces (no [CLS]/[SEP])."""
    if len(pieces) <= window:
        return list(pieces)
    head = long_text.kept_head(window)
    return [*pieces[:head], *pieces[len(pieces) - (window - head):]]


def num_windows(length: int, window: int, stride: int) -> int:
    """Windows of a text of `length` pieces: 1 when it fits (also when empty), else enough
    starts 0, stride, 2·stride, ... for the last window to end at the text's end."""
    return 1 + max(0, -(-(length - window) // stride))


def window_spans(length: int, window: int, stride: int) -> list[tuple[int, int]]:
    """(start, end) of each window of a text of `length` pieces; the last ends at `length`."""
    return [(k * stride, min(k * stride + window, length))
            for k in range(num_windows(length, window, stride))]
