"""The original BERT's pretraining step and encoder as a TF1 graph, rebuilt for side-by-side timing.

Written here from the published formulas (the original's modeling.py, run_pretraining.py and
optimization.py), with the original's choices that matter for speed: separate query/key/value dense
layers on [B·S,H] activations, the tanh GELU written out as in the paper, a [B,1,S,S] additive
mask, `tf.nn.dropout` (stateful Philox), LayerNorm via moments (ε 1e-12), the token-type embedding
as a one-hot matmul, the masked-LM head on gathered positions with a one-hot log-softmax loss, and
the optimizer as per-variable graph ops: global-norm clipping, Adam without bias correction,
decoupled weight decay, warm-up + linear decay. Everything runs in one `tf.compat.v1.Session` with
TensorFlow's default thread pools, as the original's `run_pretraining.py` does on CPU.

Only the benchmarks import this module; it is not part of the library.
"""

from __future__ import annotations

import math
import time

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1

FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
            "masked_lm_weights", "next_sentence_labels")


def _gelu(x):
    cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
    return x * cdf


def _init(config):
    return v1.truncated_normal_initializer(stddev=config.initializer_range)


def _dense(x, units, name, config, activation=None):
    with v1.variable_scope(name):
        kernel = v1.get_variable("kernel", [x.shape[-1], units], initializer=_init(config))
        bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
        y = tf.nn.bias_add(tf.matmul(x, kernel), bias)
        return activation(y) if activation else y


def _layer_norm(x, name):
    with v1.variable_scope(name):
        beta = v1.get_variable("beta", [x.shape[-1]], initializer=v1.zeros_initializer())
        gamma = v1.get_variable("gamma", [x.shape[-1]], initializer=v1.ones_initializer())
        mean, variance = tf.nn.moments(x, [-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, variance, beta, gamma, 1e-12)


def _dropout(x, rate, training):
    return tf.nn.dropout(x, rate=rate) if training and rate > 0 else x


def encoder(config, input_ids, input_mask, segment_ids, training: bool):
    """The original's BertModel: returns (sequence_output [B,S,H], pooled_output [B,H], table)."""
    batch, seq = input_ids.shape
    h, n = config.hidden_size, config.num_attention_heads
    d = h // n
    with v1.variable_scope("bert"):
        with v1.variable_scope("embeddings"):
            table = v1.get_variable("word_embeddings", [config.vocab_size, h],
                                    initializer=_init(config))
            x = tf.gather(table, input_ids)
            types = v1.get_variable("token_type_embeddings", [config.type_vocab_size, h],
                                    initializer=_init(config))
            one_hot = tf.one_hot(tf.reshape(segment_ids, [-1]), depth=config.type_vocab_size)
            x += tf.reshape(tf.matmul(one_hot, types), [batch, seq, h])
            positions = v1.get_variable("position_embeddings",
                                        [config.max_position_embeddings, h],
                                        initializer=_init(config))
            x += tf.reshape(tf.slice(positions, [0, 0], [seq, -1]), [1, seq, h])
            x = _dropout(_layer_norm(x, "LayerNorm"), config.hidden_dropout_prob, training)
        mask = tf.cast(tf.reshape(input_mask, [batch, 1, seq]), tf.float32)
        adder = (1.0 - tf.ones([batch, seq, 1]) * mask)[:, tf.newaxis] * -10000.0  # [B,1,S,S]
        x = tf.reshape(x, [-1, h])
        with v1.variable_scope("encoder"):
            for layer in range(config.num_hidden_layers):
                with v1.variable_scope(f"layer_{layer}"):
                    x = _block(config, x, adder, batch, seq, n, d, training)
        sequence_output = tf.reshape(x, [batch, seq, h])
        with v1.variable_scope("pooler"):
            pooled = _dense(sequence_output[:, 0], h, "dense", config, tf.tanh)
    return sequence_output, pooled, table


def _block(config, x, adder, batch, seq, n, d, training):
    h = n * d

    def heads(t):
        return tf.transpose(tf.reshape(t, [batch, seq, n, d]), [0, 2, 1, 3])

    with v1.variable_scope("attention"):
        with v1.variable_scope("self"):
            q = heads(_dense(x, h, "query", config))
            k = heads(_dense(x, h, "key", config))
            v = heads(_dense(x, h, "value", config))
            scores = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(d)) + adder
            probs = _dropout(tf.nn.softmax(scores), config.attention_probs_dropout_prob,
                             training)
            context = tf.reshape(tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3]), [-1, h])
        with v1.variable_scope("output"):
            attention = _dropout(_dense(context, h, "dense", config),
                                 config.hidden_dropout_prob, training)
            attention = _layer_norm(attention + x, "LayerNorm")
    with v1.variable_scope("intermediate"):
        intermediate = _dense(attention, config.intermediate_size, "dense", config, _gelu)
    with v1.variable_scope("output"):
        out = _dropout(_dense(intermediate, h, "dense", config), config.hidden_dropout_prob,
                       training)
        return _layer_norm(out + attention, "LayerNorm")


def _pretraining_loss(config, features, training: bool):
    sequence_output, pooled, table = encoder(
        config, features["input_ids"], features["input_mask"], features["segment_ids"], training)
    batch, seq, h = sequence_output.shape
    positions = features["masked_lm_positions"]
    offsets = tf.reshape(tf.range(batch) * seq, [-1, 1])
    x = tf.gather(tf.reshape(sequence_output, [-1, h]), tf.reshape(positions + offsets, [-1]))
    with v1.variable_scope("cls/predictions"):
        with v1.variable_scope("transform"):
            x = _layer_norm(_dense(x, h, "dense", config, _gelu), "LayerNorm")
        bias = v1.get_variable("output_bias", [config.vocab_size],
                               initializer=v1.zeros_initializer())
        log_probs = tf.nn.log_softmax(tf.nn.bias_add(tf.matmul(x, table, transpose_b=True), bias))
        labels = tf.one_hot(tf.reshape(features["masked_lm_ids"], [-1]), config.vocab_size)
        weights = tf.reshape(features["masked_lm_weights"], [-1])
        per_example = -tf.reduce_sum(log_probs * labels, axis=-1)
        mlm_loss = tf.reduce_sum(weights * per_example) / (tf.reduce_sum(weights) + 1e-5)
    with v1.variable_scope("cls/seq_relationship"):
        weights = v1.get_variable("output_weights", [2, h], initializer=_init(config))
        bias = v1.get_variable("output_bias", [2], initializer=v1.zeros_initializer())
        log_probs = tf.nn.log_softmax(tf.nn.bias_add(tf.matmul(pooled, weights,
                                                               transpose_b=True), bias))
        labels = tf.one_hot(tf.reshape(features["next_sentence_labels"], [-1]), 2)
        nsp_loss = tf.reduce_mean(-tf.reduce_sum(log_probs * labels, axis=-1))
    return mlm_loss + nsp_loss


def _train_op(loss, learning_rate: float, num_train_steps: int, num_warmup_steps: int):
    step = v1.train.get_or_create_global_step()
    lr = v1.train.polynomial_decay(tf.constant(learning_rate), step, num_train_steps,
                                   end_learning_rate=0.0, power=1.0)
    if num_warmup_steps:
        warm = tf.cast(step, tf.float32) / num_warmup_steps * learning_rate
        lr = tf.where(tf.cast(step, tf.int32) < num_warmup_steps, warm, lr)
    variables = v1.trainable_variables()
    grads, _ = tf.clip_by_global_norm(tf.gradients(loss, variables), 1.0)
    updates = []
    for grad, param in zip(grads, variables):
        name = param.op.name
        m = v1.get_variable(name + "/adam_m", param.shape, initializer=v1.zeros_initializer(),
                            trainable=False)
        v = v1.get_variable(name + "/adam_v", param.shape, initializer=v1.zeros_initializer(),
                            trainable=False)
        next_m = 0.9 * m + 0.1 * grad
        next_v = 0.999 * v + 0.001 * tf.square(grad)
        update = next_m / (tf.sqrt(next_v) + 1e-6)
        if not any(word in name for word in ("LayerNorm", "layer_norm", "bias")):
            update += 0.01 * param
        updates += [param.assign(param - lr * update), m.assign(next_m), v.assign(next_v)]
    return tf.group(*updates, step.assign(step + 1))


def _placeholders(batch: int, seq: int, predictions: int) -> dict:
    shapes = {"input_ids": [batch, seq], "input_mask": [batch, seq], "segment_ids": [batch, seq],
              "masked_lm_positions": [batch, predictions], "masked_lm_ids": [batch, predictions],
              "masked_lm_weights": [batch, predictions], "next_sentence_labels": [batch, 1]}
    return {name: v1.placeholder(tf.float32 if name == "masked_lm_weights" else tf.int32,
                                 shape, name=name) for name, shape in shapes.items()}


def time_train_steps(config, batches: list[dict], warmup: int, steps: int) -> float:
    """Sequences/s of the original's training step over `steps` steps after `warmup` ones.

    `batches` (dicts of numpy arrays, all the same shapes) are fed in turn.
    """
    batch, seq = batches[0]["input_ids"].shape
    predictions = batches[0]["masked_lm_positions"].shape[1]
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(0)
        features = _placeholders(batch, seq, predictions)
        loss = _pretraining_loss(config, features, training=True)
        train_op = _train_op(loss, 1e-4, 10 ** 6, 10)
        init = v1.global_variables_initializer()
    with v1.Session(graph=graph) as session:
        session.run(init)

        def run(i):
            feed = {features[name]: batches[i % len(batches)][name] for name in FEATURES}
            session.run([train_op, loss], feed_dict=feed)

        for i in range(warmup):
            run(i)
        started = time.perf_counter()
        for i in range(warmup, warmup + steps):
            run(i)
        return steps * batch / (time.perf_counter() - started)


def time_inference(config, batch: dict, warmup: int, min_seconds: float) -> float:
    """Sequences/s of the original's `BertModel(is_training=False)` forward on `batch`."""
    size, seq = batch["input_ids"].shape
    graph = tf.Graph()
    with graph.as_default():
        features = {name: v1.placeholder(tf.int32, [size, seq], name=name)
                    for name in ("input_ids", "input_mask", "segment_ids")}
        sequence_output, pooled, _ = encoder(config, features["input_ids"],
                                             features["input_mask"], features["segment_ids"],
                                             training=False)
        init = v1.global_variables_initializer()
    with v1.Session(graph=graph) as session:
        session.run(init)
        feed = {features[name]: batch[name] for name in features}
        for _ in range(warmup):
            session.run([sequence_output, pooled], feed_dict=feed)
        calls, started = 0, time.perf_counter()
        while calls < 2 or time.perf_counter() - started < min_seconds:
            session.run([sequence_output, pooled], feed_dict=feed)
            calls += 1
        return calls * size / (time.perf_counter() - started)


def numpy_batches(records: dict[str, np.ndarray], batch: int, count: int) -> list[dict]:
    """The first `count` batches of `batch` rows from arrays keyed by feature name."""
    return [{name: np.ascontiguousarray(values[i * batch:(i + 1) * batch])
             for name, values in records.items()} for i in range(count)]
