"""`layer_norm_eps` is a config field: a Hugging Face model whose LayerNorm ε is not BERT's
1e-12 loads with its own ε and gives transformers' outputs; bert_config.json files stay the
original's."""

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from bert_tf.checkpoints import name_map as checkpoints  # noqa: E402
from bert_tf.checkpoints.hf_weights import bert_config_from_hf  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.model.encoder import BertEncoder  # noqa: E402
from support import hf_parity  # noqa: E402

EPS = 1e-2  # wide enough that ε changes every layer's output well past the tolerance


# hf_dir: a random-init BertModel whose LayerNorm ε is EPS, saved with save_pretrained.
hf_dir = hf_parity.fixtures(
    transformers.BertModel,
    {"eps": transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, intermediate_size=37,
                                    max_position_embeddings=13, layer_norm_eps=EPS)},
    base=None, batch={}, perturb=False)[0]


def test_hugging_face_layer_norm_eps_is_read_and_used(hf_dir):
    config = bert_config_from_hf(hf_dir)
    assert config.layer_norm_eps == EPS
    ids = np.random.default_rng(1).integers(1, 99, [2, 7]).astype(np.int32)
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    with torch.no_grad():
        expected = transformers.BertModel.from_pretrained(hf_dir).eval()(
            input_ids=torch.tensor(ids, dtype=torch.long)).last_hidden_state.numpy()
    outputs = {}
    for eps in (EPS, 1e-12):
        encoder = BertEncoder(config.replace(layer_norm_eps=eps))
        checkpoints.init_from_checkpoint(encoder, hf_dir)
        outputs[eps] = encoder(inputs)["sequence_output"].numpy()
    np.testing.assert_allclose(outputs[EPS], expected, atol=1e-5, rtol=0)
    assert np.abs(outputs[1e-12] - expected).max() > 1e-3  # ε matters at this size


def test_bert_config_json_names_eps_only_when_it_differs():
    config = BertConfig(vocab_size=99)
    assert "layer_norm_eps" not in json.loads(config.to_json_string())
    other = json.loads(config.replace(layer_norm_eps=1e-5).to_json_string())
    assert other["layer_norm_eps"] == 1e-5
    assert BertConfig.from_dict(other).layer_norm_eps == 1e-5
