"""Fixtures several test modules use, registered for all of them by tests/conftest.py
(`pytest_plugins`); module-scoped, so each module that asks builds its own once."""

import pytest

from support.tiny_models import train_tiny_sentencepiece, write_tiny_model


@pytest.fixture(scope="module")
def char_model(tmp_path_factory):
    """A character-level tiny model (vocab.txt, bert_config.json) of one encoder layer: the
    tagging runs check tagging, windows, files and errors, not depth."""
    directory = tmp_path_factory.mktemp("char_model")
    write_tiny_model(directory, "张三李四王五在去北京上海工作开会", num_hidden_layers=1)
    return directory


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory) -> str:
    """A tiny unigram SentencePiece model (800 generated lines, 200 pieces) with BERT's special
    names; returns its .model path."""
    return train_tiny_sentencepiece(str(tmp_path_factory.mktemp("spm") / "tiny"), 800, 200)
