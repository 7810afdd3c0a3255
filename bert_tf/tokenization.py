"""The original tokenization.py's names, for code written against it
(`from bert_tf import tokenization`).

Nothing is implemented here: the tokenizers are `bert_tf.text.tokenizers` (docs/tokenization.md).
The original's own tests call its private character classes, so those are here too.
"""

from bert_tf.text.tokenizers import (BasicTokenizer, FullTokenizer, SentencePieceTokenizer,
                                     WordpieceTokenizer, _is_control, _is_punctuation,
                                     _is_whitespace, convert_by_vocab, convert_ids_to_tokens,
                                     convert_to_unicode, convert_tokens_to_ids, create_tokenizer,
                                     load_vocab, printable_text, validate_case_matches_checkpoint,
                                     whitespace_tokenize)

__all__ = [
    "BasicTokenizer", "FullTokenizer", "SentencePieceTokenizer", "WordpieceTokenizer",
    "convert_by_vocab", "convert_ids_to_tokens", "convert_to_unicode", "convert_tokens_to_ids",
    "create_tokenizer", "load_vocab", "printable_text", "validate_case_matches_checkpoint",
    "whitespace_tokenize",
]
