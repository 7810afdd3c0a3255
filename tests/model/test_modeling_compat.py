"""The original modeling.py's API: BertModel, BertConfig, the checkpoint and functional helpers.

Covers every case of the original's modeling_test.py (its tester's sizes and expectations),
then what that test could not check: values at every position against the encoder, weight
sharing by scope, tf.function and Keras use, and checkpoint loading by the original's names.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import modeling, optimization
from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.model import compat_helpers


@pytest.fixture(autouse=True)
def fresh_scopes():
    modeling.reset_variable_scopes()
    yield
    modeling.reset_variable_scopes()


def ids_tensor(shape, vocab_size, rng):
    return tf.constant(rng.integers(0, vocab_size, size=shape), tf.int32)


# The original tester's sizes: batch 13, seq 7, vocab 99, hidden 32, 5 layers, 4 heads, I 37.
TESTER_CONFIG = dict(vocab_size=99, hidden_size=32, num_hidden_layers=5, num_attention_heads=4,
                     intermediate_size=37, hidden_act="gelu", hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                     type_vocab_size=16, initializer_range=0.02)


def _tester_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (ids_tensor([13, 7], 99, rng), ids_tensor([13, 7], 2, rng), ids_tensor([13, 7], 16, rng))


def test_original_tester_output_shapes():
    input_ids, input_mask, token_type_ids = _tester_inputs()
    model = modeling.BertModel(config=modeling.BertConfig(**TESTER_CONFIG), is_training=True,
                               input_ids=input_ids, input_mask=input_mask,
                               token_type_ids=token_type_ids, scope=None)
    assert model.get_embedding_output().shape == (13, 7, 32)
    assert model.get_sequence_output().shape == (13, 7, 32)
    assert model.get_pooled_output().shape == (13, 32)
    layers = model.get_all_encoder_layers()
    assert len(layers) == 5 and all(layer.shape == (13, 7, 32) for layer in layers)
    assert model.get_embedding_table().shape == (99, 32)


def _unreachable_ops(graph, outputs, side_effects) -> list[str]:
    """Names of the ops of `graph` that feed neither `outputs` (tensors) nor `side_effects`
    (ops that run for their effect: variable assignments)."""
    stack = [t.op for t in outputs] + list(side_effects)
    seen = set()
    while stack:
        op = stack.pop()
        if op.name not in seen:
            seen.add(op.name)
            stack.extend([t.op for t in op.inputs] + list(op.control_inputs))
    return [op.name for op in graph.get_operations() if op.name not in seen]


def test_original_tester_graph_has_no_unreachable_op():
    """The original's check that every op of the model's graph serves its outputs (here the
    graph tf.function traces; dropout's seed updates run as the function's side effects)."""
    inputs = _tester_inputs()
    config = modeling.BertConfig(**TESTER_CONFIG)

    def outputs():
        model = modeling.BertModel(config, True, *inputs)
        return [model.get_embedding_output(), model.get_sequence_output(),
                model.get_pooled_output(), *model.get_all_encoder_layers()]

    traced = tf.function(outputs).get_concrete_function()
    graph = traced.graph
    assert _unreachable_ops(graph, graph.outputs, graph.control_outputs) == []


def test_config_to_json_string_keeps_sizes_the_heads_do_not_divide():
    config = modeling.BertConfig(vocab_size=99, hidden_size=37)
    obj = json.loads(config.to_json_string())
    assert obj["vocab_size"] == 99 and obj["hidden_size"] == 37
    assert modeling.BertConfig.from_dict(obj).to_dict() == config.to_dict()
    with pytest.raises(ValueError, match="not a multiple of the number of attention heads"):
        modeling.BertModel(config, False, tf.zeros([1, 3], tf.int32))


def test_every_position_is_the_original_computation(tiny_config):
    """Padding positions too: the encoder computing every position gives the same numbers."""
    rng = np.random.default_rng(1)
    mask = (np.arange(9)[None, :] < np.array([[9], [4], [6]])).astype(np.int32)
    ids, types = rng.integers(1, 99, size=(3, 9)) * mask, rng.integers(0, 2, size=(3, 9)) * mask
    model = modeling.BertModel(tiny_config, False, ids, mask, types)
    expected = model.encoder({"input_ids": ids, "input_mask": mask, "segment_ids": types},
                             static_shapes=True)
    np.testing.assert_allclose(model.get_sequence_output(), expected["sequence_output"], atol=1e-6)
    np.testing.assert_allclose(model.get_pooled_output(), expected["pooled_output"], atol=1e-6)
    padding = model.get_sequence_output().numpy()[mask == 0]
    assert np.abs(padding).min() > 0  # computed, not zeros
    for ours, theirs in zip(model.get_all_encoder_layers(), expected["encoder_outputs"]):
        np.testing.assert_allclose(ours, theirs, atol=1e-6)
    # The embedding output is the blocks' input: LayerNorm of the three embeddings summed.
    encoder = model.encoder
    summed = (tf.gather(encoder.embedding_table, ids) + tf.gather(
        encoder.embeddings.token_type_embeddings, types) + encoder.embeddings.position_embeddings[:9])
    np.testing.assert_allclose(model.get_embedding_output(),
                               encoder.embeddings.layer_norm(summed), atol=1e-5)


def test_defaults_for_mask_and_token_types(tiny_config):
    ids = np.array([[5, 6, 7, 8]], np.int32)
    full = modeling.BertModel(tiny_config, False, ids, np.ones_like(ids), np.zeros_like(ids))
    default = modeling.BertModel(tiny_config, False, ids)
    np.testing.assert_allclose(default.get_sequence_output(), full.get_sequence_output(), atol=1e-6)


def test_scope_shares_weights_and_dropout_follows_is_training(tiny_config):
    ids = tf.constant([[3, 4, 5, 6]])
    first = modeling.BertModel(tiny_config, True, ids)
    second = modeling.BertModel(tiny_config, False, ids)
    other = modeling.BertModel(tiny_config, False, ids, scope="other")
    assert first.get_embedding_table() is second.get_embedding_table()
    assert other.get_embedding_table() is not first.get_embedding_table()
    again = modeling.BertModel(tiny_config, False, ids)
    np.testing.assert_array_equal(again.get_pooled_output(), second.get_pooled_output())
    assert np.abs(first.get_sequence_output() - second.get_sequence_output()).max() > 1e-3
    with pytest.raises(ValueError, match="scope 'bert' already holds .* differs in hidden_size"):
        modeling.BertModel(tiny_config.replace(hidden_size=64), False, ids)
    # The original's eval config: dropout 0; shared for evaluation, not for training.
    no_dropout = tiny_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    assert modeling.BertModel(no_dropout, False, ids).get_embedding_table() is first.get_embedding_table()
    with pytest.raises(ValueError, match="differs in hidden_dropout_prob"):
        modeling.BertModel(no_dropout, True, ids)
    assert modeling.variable_name(other.get_embedding_table()) == "other/embeddings/word_embeddings"


def test_tf_function_and_keras_model_give_the_eager_values(tiny_config):
    ids, mask = tf.constant([[3, 4, 5, 0], [7, 8, 0, 0]]), tf.constant([[1, 1, 1, 0], [1, 1, 0, 0]])
    eager = modeling.BertModel(tiny_config, False, ids, mask)

    @tf.function
    def pooled(input_ids, input_mask):
        return modeling.BertModel(tiny_config, False, input_ids, input_mask).get_pooled_output()

    np.testing.assert_allclose(pooled(ids, mask), eager.get_pooled_output(), atol=1e-6)
    inputs = [keras.Input((None,), dtype="int32") for _ in range(2)]
    symbolic = modeling.BertModel(tiny_config, True, inputs[0], inputs[1])
    model = keras.Model(inputs, [symbolic.get_pooled_output(), symbolic.get_sequence_output()])
    pooled_k, sequence_k = model([ids, mask], training=False)
    np.testing.assert_allclose(pooled_k, eager.get_pooled_output(), atol=1e-6)
    np.testing.assert_allclose(sequence_k, eager.get_sequence_output(), atol=1e-6)
    assert len(model.trainable_variables) == len(eager.trainable_variables) == 5 + 16 * 2 + 2


def test_assignment_map_and_init_from_checkpoint_by_original_names(tiny_config, tmp_path):
    source = modeling.BertEncoder(tiny_config)
    for v in source.variables:  # every weight different from a fresh initialisation
        v.assign(tf.random.normal(v.shape, seed=len(v.path)))
    prefix = checkpoints.export_google_checkpoint(source, str(tmp_path / "bert_model.ckpt"))
    ids = tf.constant([[5, 9, 2, 0]])
    model = modeling.BertModel(tiny_config, False, ids, scope="bert")
    head = tf.Variable(tf.zeros([32, 3]), name="label_embeddings")
    tvars = model.trainable_variables + [head]
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(tvars, prefix)
    assert list(assignment_map) == [name for name, _ in tf.train.list_variables(prefix)]
    assert len(assignment_map) == 5 + 16 * 2 + 2 and "label_embeddings" not in initialized
    assert "bert/pooler/dense/kernel:0" in initialized
    loaded = modeling.init_from_checkpoint(prefix, assignment_map)
    assert sorted(loaded) == sorted(assignment_map)
    ours = {modeling.variable_name(v): v for v in model.trainable_variables}
    for mapping in checkpoints.encoder_mappings(source):
        np.testing.assert_array_equal(ours[mapping.name], mapping.variable)
    expected = source({"input_ids": ids}, training=False)["pooled_output"]
    np.testing.assert_allclose(modeling.BertModel(tiny_config, False, ids).get_pooled_output(),
                               expected, atol=1e-6)


def test_init_from_checkpoint_maps_a_scope_and_checks_names_and_shapes(tiny_config, tmp_path):
    source = modeling.BertEncoder(tiny_config)
    prefix = checkpoints.export_google_checkpoint(source, str(tmp_path / "bert_model.ckpt"))
    model = modeling.BertModel(tiny_config, False, tf.constant([[1, 2]]), scope="student")
    loaded = modeling.init_from_checkpoint(prefix, {"bert/": "student/"})
    assert len(loaded) == 5 + 16 * 2 + 2
    np.testing.assert_array_equal(model.get_embedding_table(), source.embedding_table)
    with pytest.raises(ValueError, match="bert/nothing is not found"):
        modeling.init_from_checkpoint(prefix, {"bert/nothing": "student/pooler/dense/bias"})
    with pytest.raises(ValueError, match="has shape"):
        modeling.init_from_checkpoint(prefix, {"bert/pooler/dense/bias": "student/pooler/dense/kernel"})


def test_docstring_example_and_the_original_create_optimizer_call():
    """The original BertModel docstring's inputs and head (on sizes 6 heads divide evenly;
    the docstring's 512/6 raised in the original too), trained by `create_optimizer(loss, ...)`."""
    input_ids = tf.constant([[31, 51, 99], [15, 5, 0]])
    input_mask = tf.constant([[1, 1, 1], [1, 1, 0]])
    token_type_ids = tf.constant([[0, 0, 1], [0, 2, 0]])
    config = modeling.BertConfig(vocab_size=128, hidden_size=48, num_hidden_layers=2,
                                 num_attention_heads=6, intermediate_size=64)
    label_embeddings = tf.Variable(modeling.create_initializer()([48, 3]), name="label_embeddings")
    labels = tf.constant([2, 0])

    def loss():
        model = modeling.BertModel(config=config, is_training=True, input_ids=input_ids,
                                   input_mask=input_mask, token_type_ids=token_type_ids)
        logits = tf.matmul(model.get_pooled_output(), label_embeddings)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))

    train_op = optimization.create_optimizer(loss, 1e-2, 10, 1, False)
    assert isinstance(train_op.optimizer, optimization.AdamWeightDecayOptimizer)
    assert [float(train_op.learning_rate(s)) for s in (0, 1, 5)] == pytest.approx([0, 9e-3, 5e-3])
    table = modeling.BertModel(config, False, input_ids).get_embedding_table()
    start = table.numpy().copy()
    train_op()  # step 0: warm-up rate 0, nothing moves
    np.testing.assert_array_equal(table, start)
    train_op()
    assert int(train_op.optimizer.iterations) == 2 and np.abs(table.numpy() - start).max() > 0
    decayed = {modeling.variable_name(v) for v in train_op.optimizer._trainable_variables
               if train_op.optimizer.uses_weight_decay(v)}
    assert len(decayed) == 3 + 6 * 2 + 1 + 1 and "label_embeddings" in decayed
    assert not any("LayerNorm" in name or "bias" in name for name in decayed)
    with pytest.raises(ValueError, match="as a function of no arguments"):
        optimization.create_optimizer(loss(), 1e-2, 10, 1, False)


def test_shape_and_rank_helpers():
    x = tf.zeros([2, 3, 4])
    assert modeling.get_shape_list(x, expected_rank=3) == [2, 3, 4]
    with pytest.raises(ValueError, match="actual rank `3`.*expected rank `2`"):
        modeling.get_shape_list(x, expected_rank=2)
    modeling.assert_rank(x, [2, 3])

    @tf.function(input_signature=[tf.TensorSpec([None, 3, 4])])
    def dynamic(t):
        shape = modeling.get_shape_list(t)
        assert tf.is_tensor(shape[0]) and shape[1:] == [3, 4]
        matrix = modeling.reshape_to_matrix(t)  # [B*3,4]
        return modeling.reshape_from_matrix(matrix * 2.0, shape), tf.shape(matrix)

    back, matrix_shape = dynamic(tf.ones([5, 3, 4]))
    np.testing.assert_array_equal(back, np.full([5, 3, 4], 2.0))
    assert matrix_shape.numpy().tolist() == [15, 4]


def test_attention_mask_activation_and_initializer_helpers():
    mask = modeling.create_attention_mask_from_input_mask(tf.zeros([2, 3]), [[1, 1, 0, 0], [1, 0, 0, 0]])
    assert mask.shape == (2, 3, 4) and mask.dtype == tf.float32
    np.testing.assert_array_equal(mask[0], [[1, 1, 0, 0]] * 3)
    np.testing.assert_array_equal(mask[1], [[1, 0, 0, 0]] * 3)
    x = tf.constant([-3.0, -0.5, 0.0, 1.0, 2.5])
    expected = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(modeling.gelu(x), expected, atol=1e-6)
    assert modeling.get_activation("linear") is None and modeling.get_activation("") is None
    assert modeling.get_activation(None) is None and modeling.get_activation(tf.tanh) is tf.tanh
    np.testing.assert_array_equal(modeling.get_activation("ReLU")(x), tf.nn.relu(x))
    with pytest.raises(ValueError, match="unknown hidden_act 'swish'"):
        modeling.get_activation("swish")
    values = modeling.create_initializer(0.5)([200, 200]).numpy()
    assert np.abs(values).max() <= 1.0 and 0.4 < values.std() < 0.5  # cut at 2σ: std 0.88σ


def test_dropout_layer_norm_and_embedding_helpers(monkeypatch):
    x = tf.random.normal([64, 64], seed=1) + 3.0
    assert modeling.dropout(x, 0.0) is x and modeling.dropout(x, None) is x
    dropped = modeling.dropout(tf.ones([100, 100]), 0.25).numpy()
    assert set(np.unique(dropped)) <= {0.0, np.float32(1 / 0.75)} and 0.2 < (dropped == 0).mean() < 0.3
    normed = modeling.layer_norm(x).numpy()
    np.testing.assert_allclose(normed.mean(-1), 0, atol=1e-5)
    np.testing.assert_allclose(normed.var(-1), 1, atol=1e-3)
    np.testing.assert_array_equal(modeling.layer_norm_and_dropout(x, 0.0), normed)

    ids = tf.constant([[1, 4, 2], [0, 3, 3]])
    output, table = modeling.embedding_lookup(ids, vocab_size=5, embedding_size=6)
    assert output.shape == (2, 3, 6) and table.shape == (5, 6)
    np.testing.assert_array_equal(output, tf.gather(table, ids))
    one_hot, one_hot_table = modeling.embedding_lookup(ids, 5, 6, use_one_hot_embeddings=True)
    np.testing.assert_allclose(one_hot, tf.gather(one_hot_table, ids), atol=1e-6)
    tables = {}  # the type and position tables the postprocessor creates, by name
    new_table = compat_helpers._new_table
    monkeypatch.setattr(compat_helpers, "_new_table", lambda name, *args: tables.setdefault(
        name, new_table(name, *args)))
    post = modeling.embedding_postprocessor(output, use_token_type=True, token_type_ids=ids % 2,
                                            max_position_embeddings=8, dropout_prob=0.0)
    summed = (output.numpy() + tables["token_type_embeddings"].numpy()[ids.numpy() % 2]
              + tables["position_embeddings"].numpy()[:3][None])  # word + type + position
    centred = summed - summed.mean(-1, keepdims=True)
    expected = centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + 1e-12)  # LayerNorm
    np.testing.assert_allclose(post.numpy(), expected, atol=1e-5)
    with pytest.raises(ValueError, match="token_type_ids"):
        modeling.embedding_postprocessor(output, use_token_type=True)
    with pytest.raises(tf.errors.InvalidArgumentError):
        modeling.embedding_postprocessor(output, max_position_embeddings=2)
