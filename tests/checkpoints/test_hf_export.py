"""Hugging Face directories out and fine-tuned heads in (bert_tf.checkpoints.hf_export).

For BERT (WordPiece) and ALBERT (SentencePiece), cased and uncased, and each architecture
(pretraining, sequence classification, token classification, question answering): a tiny model
with random weights is exported, transformers loads it with no missing or unexpected weight,
AutoTokenizer from the exported directory gives exactly our tokenizer's ids on raw sentences,
and transformers' logits on those ids equal ours (<= 1e-5, float32). The export read back is
the same weights bit for bit; transformers-made token and span heads predict in bert_tf as in
transformers. Nothing is downloaded.
"""

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from bert_tf import tokenization  # noqa: E402
from bert_tf.checkpoints import hf_export  # noqa: E402
from bert_tf.checkpoints import name_map as checkpoints  # noqa: E402
from bert_tf.checkpoints.hf_weights import bert_config_from_hf  # noqa: E402
from bert_tf.model import models  # noqa: E402
from bert_tf.model.albert.config import AlbertConfig  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from tiny_models import SPECIAL_TOKENS, train_tiny_sentencepiece, words_of  # noqa: E402

TOLERANCE = 1e-5
SINGLES = ["The quick brown Fox jumps over the lazy dog.", "Héllo, WÖRLD!", "BERT"]
PAIRS = [("Checkpoints written here load there.", "Heads come back whole."),
         ("Un café, s'il vous plaît", "naïve résumé")]
TEXTS = SINGLES + [text for pair in PAIRS for text in pair]
TOKEN_LABELS = ["O", "B-PER", "I-PER", "B-LOC"]
CLASS_LABELS = ["negative", "neutral", "positive"]
ARCHITECTURES = ("pretraining", "sequence", "token", "span")
AUTO_CLASSES = {"pretraining": transformers.AutoModelForPreTraining,
                "sequence": transformers.AutoModelForSequenceClassification,
                "token": transformers.AutoModelForTokenClassification,
                "span": transformers.AutoModelForQuestionAnswering}
CASES = [(family, cased, architecture) for family in ("bert", "albert")
         for cased in (False, True) for architecture in ARCHITECTURES]
SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=64, type_vocab_size=2)


def _wordpiece_vocab(directory: str, cased: bool) -> str:
    """vocab.txt: the special tokens, the words of TEXTS as BasicTokenizer splits them (less
    'jumps', which WordPiece then cuts into jump ##s, and 'lazy', which becomes [UNK])."""
    basic = tokenization.BasicTokenizer(do_lower_case=not cased)
    words = {w for text in TEXTS for w in basic.tokenize(text)} - {"jumps", "lazy"}
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join([*SPECIAL_TOKENS, *sorted(words), "jump", "##s"]) + "\n")
    return path


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory):
    """(family, cased) → TokenizerFiles and config."""
    directory = str(tmp_path_factory.mktemp("vocab"))
    spm = train_tiny_sentencepiece(os.path.join(directory, "spm"), num_lines=600, vocab_size=200)
    out = {}
    for cased in (False, True):
        os.makedirs(os.path.join(directory, str(cased)))
        vocab = _wordpiece_vocab(os.path.join(directory, str(cased)), cased)
        # Both activations: ours "gelu" (tanh) is transformers' gelu_new, "gelu_exact" its gelu.
        act = "gelu_exact" if cased else "gelu"
        with open(vocab, encoding="utf-8") as f:
            size = len(f.read().split("\n")) - 1
        out["bert", cased] = (hf_export.TokenizerFiles(vocab_file=vocab, do_lower_case=not cased,
                                                       max_seq_length=48),
                              BertConfig(vocab_size=size, hidden_act=act, **SIZES))
        out["albert", cased] = (hf_export.TokenizerFiles(spm_model_file=spm,
                                                         do_lower_case=not cased,
                                                         max_seq_length=48),
                                AlbertConfig(vocab_size=200, embedding_size=16, hidden_act=act,
                                             num_hidden_groups=2, inner_group_num=2,
                                             **{**SIZES, "num_hidden_layers": 4}))
    return out


def _build(architecture: str, config: BertConfig, seed: int, crf: bool = False):
    """The model with every weight random (LayerNorm scales around 1), so each one matters."""
    model = {"pretraining": lambda: models.pretraining_model(config),
             "sequence": lambda: models.classifier_model(config, len(CLASS_LABELS)),
             "token": lambda: models.token_classifier_model(config, len(TOKEN_LABELS), crf=crf),
             "span": lambda: models.span_model(config)}[architecture]()
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        value = rng.normal(0, 0.2, variable.shape)
        variable.assign((value + 1 if "gamma" in variable.path else value).astype(np.float32))
    return model


def _head(architecture: str) -> hf_export.HeadLabels:
    labels = {"sequence": CLASS_LABELS, "token": TOKEN_LABELS}.get(architecture)
    return hf_export.HeadLabels(labels=labels)


def _our_ids(tokenizer_files: hf_export.TokenizerFiles, a: str, b: str | None) -> list[int]:
    tokenizer = tokenization.create_tokenizer(tokenizer_files.vocab_file,
                                              tokenizer_files.spm_model_file,
                                              tokenizer_files.do_lower_case)
    tokens = ["[CLS]", *tokenizer.tokenize(a), "[SEP]"]
    if b is not None:
        tokens += [*tokenizer.tokenize(b), "[SEP]"]
    return tokenizer.convert_tokens_to_ids(tokens)


def _our_logits(model, architecture: str, batch: dict) -> dict[str, np.ndarray]:
    features = {"input_ids": batch["input_ids"].numpy().astype(np.int32),
                "input_mask": batch["attention_mask"].numpy().astype(np.int32),
                "segment_ids": batch["token_type_ids"].numpy().astype(np.int32)}
    if architecture == "pretraining":
        # Every real position (padding positions point at [CLS]; they are not compared).
        positions = np.arange(features["input_ids"].shape[1], dtype=np.int32)[None, :]
        features["masked_lm_positions"] = np.where(features["input_mask"] > 0, positions, 0)
    outputs = {k: v.numpy() for k, v in model(features).items()}
    return {"pretraining": lambda: {"prediction_logits": outputs["masked_lm_logits"],
                                    "relationship": outputs["next_sentence_logits"]},
            "sequence": lambda: {"logits": outputs["logits"]},
            "token": lambda: {"logits": outputs["logits"]},
            "span": lambda: {"start_logits": outputs["start_logits"],
                             "end_logits": outputs["end_logits"]}}[architecture]()


def _their_logits(model, architecture: str, batch: dict) -> dict[str, np.ndarray]:
    with torch.no_grad():
        out = model(**batch)
    if architecture == "pretraining":
        relationship = out.sop_logits if hasattr(out, "sop_logits") else out.seq_relationship_logits
        return {"prediction_logits": out.prediction_logits.numpy(),
                "relationship": relationship.numpy()}
    names = {"span": ("start_logits", "end_logits")}.get(architecture, ("logits",))
    return {name: getattr(out, name).numpy() for name in names}


def _assert_same_logits(ours: dict, theirs: dict, mask: np.ndarray) -> None:
    assert ours.keys() == theirs.keys()
    for name, expected in theirs.items():
        got = ours[name]
        if got.ndim >= 2 and got.shape[:2] == mask.shape:  # per token: padding is not compared
            got, expected = got[mask.astype(bool)], expected[mask.astype(bool)]
        assert got.shape == expected.shape, name
        assert np.abs(got - expected).max() <= TOLERANCE, (name, np.abs(got - expected).max())


@pytest.fixture(scope="module")
def exports(vocabularies, tmp_path_factory):
    """case → (our model, exported directory)."""
    root = tmp_path_factory.mktemp("exports")
    out = {}
    for seed, (family, cased, architecture) in enumerate(CASES):
        tokenizer_files, config = vocabularies[family, cased]
        model = _build(architecture, config, seed)
        directory = str(root / f"{family}_{cased}_{architecture}")
        hf_export.export_hf_directory(model, directory, tokenizer_files, _head(architecture))
        out[family, cased, architecture] = model, directory
    return out


@pytest.mark.parametrize("family,cased,architecture", CASES)
def test_transformers_loads_the_export_and_gives_our_logits(family, cased, architecture,
                                                            vocabularies, exports):
    model, directory = exports[family, cased, architecture]
    tokenizer_files, _ = vocabularies[family, cased]
    theirs, info = AUTO_CLASSES[architecture].from_pretrained(
        directory, output_loading_info=True, attn_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert not info["mismatched_keys"], info
    assert type(theirs).__name__ == hf_export.architecture(model)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    assert tokenizer.model_max_length == 48
    for texts, pairs in ((SINGLES, None), ([a for a, _ in PAIRS], [b for _, b in PAIRS])):
        batch = tokenizer(texts, pairs, padding=True, return_tensors="pt")
        for row, text in enumerate(texts):
            length = int(batch["attention_mask"][row].sum())
            assert batch["input_ids"][row, :length].tolist() == _our_ids(
                tokenizer_files, text, pairs[row] if pairs else None), text
        _assert_same_logits(_our_logits(model, architecture, batch),
                            _their_logits(theirs.eval(), architecture, batch),
                            batch["attention_mask"].numpy())


@pytest.mark.parametrize("family,cased,architecture", CASES)
def test_the_export_reads_back_bit_for_bit(family, cased, architecture, vocabularies, exports):
    model, directory = exports[family, cased, architecture]
    config = bert_config_from_hf(directory)
    assert config == model.config
    again = _build(architecture, config, seed=99)
    report = checkpoints.init_from_checkpoint(again, directory)
    assert not report.unused and not report.mismatched, report
    # transformers' token and span models have no pooler: it is the one weight not written.
    assert all("pooler" in name for name in report.missing), report
    for mine, theirs in zip(model.weights, again.weights):
        if "pooler" not in mine.path or architecture in ("pretraining", "sequence"):
            assert np.array_equal(mine.numpy(), theirs.numpy()), mine.path


def test_config_names_labels_activation_and_problem_type(exports):
    _, directory = exports["bert", True, "sequence"]
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        values = json.load(f)
    assert values["architectures"] == ["BertForSequenceClassification"]
    assert values["hidden_act"] == "gelu"  # ours gelu_exact: the erf form
    assert values["problem_type"] == "single_label_classification" and values["dtype"] == "float32"
    config = transformers.AutoConfig.from_pretrained(directory)
    assert config.id2label == dict(enumerate(CLASS_LABELS))
    assert transformers.AutoConfig.from_pretrained(
        exports["albert", False, "token"][1]).hidden_act == "gelu_new"  # ours gelu: tanh


def test_bfloat16_export_holds_the_rounded_weights(vocabularies, exports, tmp_path):
    model, _ = exports["bert", False, "sequence"]
    directory = hf_export.export_hf_directory(model, str(tmp_path / "bf16"),
                                              vocabularies["bert", False][0],
                                              _head("sequence"), dtype="bfloat16")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(directory)
    assert theirs.dtype == torch.bfloat16
    kernel = model.encoder.weights[5].numpy()
    rounded = tf.cast(tf.cast(kernel, tf.bfloat16), tf.float32).numpy()
    again = models.classifier_model(bert_config_from_hf(directory), len(CLASS_LABELS))
    checkpoints.init_from_checkpoint(again, directory)
    assert np.array_equal(again.encoder.weights[5].numpy(), rounded)
    assert not np.array_equal(rounded, kernel)
