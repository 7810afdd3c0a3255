"""Checkpoints: the original TF1 layout both ways, bert_tf object checkpoints, Hugging Face
directories, and the errors a user meets with a wrong config or path."""

import os
import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import name_map as checkpoints, hf_weights
from bert_tf.checkpoints.files import CheckpointError, resolve_checkpoint, write_tf1_checkpoint
from bert_tf.model import models
from bert_tf.model.encoder import BertEncoder

B, S = 7, 13


def _features(config, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, S + 1, size=B)
    mask = (np.arange(S)[None, :] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(1, config.vocab_size, size=(B, S)).astype(np.int32) * mask
    return {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
            "segment_ids": tf.constant((rng.random((B, S)) < 0.5).astype(np.int32) * mask),
            # Masked positions at real tokens, as the data step draws them.
            "masked_lm_positions": tf.constant(
                rng.integers(0, lengths[:, None], size=(B, 3)).astype(np.int32))}


def _randomize(model, seed=1):
    """Gives every weight distinct random values, so a swapped or skipped copy shows."""
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign(rng.normal(0, 0.5, v.shape).astype(np.float32))
    return model


def _original_names(config, heads=()):
    names = ["bert/embeddings/" + n for n in (
        "word_embeddings", "token_type_embeddings", "position_embeddings", "LayerNorm/gamma",
        "LayerNorm/beta")]
    for i in range(config.num_hidden_layers):
        for part in ("attention/self/query", "attention/self/key", "attention/self/value",
                     "attention/output/dense", "intermediate/dense", "output/dense"):
            names += [f"bert/encoder/layer_{i}/{part}/kernel", f"bert/encoder/layer_{i}/{part}/bias"]
        for part in ("attention/output/LayerNorm", "output/LayerNorm"):
            names += [f"bert/encoder/layer_{i}/{part}/gamma", f"bert/encoder/layer_{i}/{part}/beta"]
    return set(names) | {"bert/pooler/dense/kernel", "bert/pooler/dense/bias"} | set(heads)


PRETRAINING_HEADS = (
    "cls/predictions/transform/dense/kernel", "cls/predictions/transform/dense/bias",
    "cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/LayerNorm/beta",
    "cls/predictions/output_bias", "cls/seq_relationship/output_weights",
    "cls/seq_relationship/output_bias")


@pytest.mark.parametrize("build, heads", [
    (lambda c: models.pretraining_model(c), PRETRAINING_HEADS),
    (lambda c: models.classifier_model(c, 3), ("output_weights", "output_bias")),
    (lambda c: models.span_model(c), ("cls/squad/output_weights", "cls/squad/output_bias")),
    (lambda c: models.token_classifier_model(c, 5), ("output_weights", "output_bias")),
])
def test_export_writes_original_names_and_reimports_identically(tmp_path, tiny_config, build, heads):
    model = _randomize(build(tiny_config))
    prefix = str(tmp_path / "out" / "bert_model.ckpt")
    checkpoints.export_google_checkpoint(model, prefix)
    shapes = dict(tf.train.list_variables(prefix))
    assert set(shapes) == _original_names(tiny_config, heads)
    assert shapes["bert/encoder/layer_1/intermediate/dense/kernel"] == [32, 37]  # [in, out]
    assert sorted(os.listdir(tmp_path / "out")) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]
    again = build(tiny_config)
    report = checkpoints.init_from_checkpoint(again, tmp_path / "out")
    assert (report.kind, report.missing, report.unused) == ("tf1", [], [])
    for a, b in zip(model.weights, again.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_export_is_readable_by_tf1_graph_apis(tmp_path, tiny_config):
    """The original restores with tf.train.init_from_checkpoint / Saver in graph mode."""
    model = _randomize(models.pretraining_model(tiny_config))
    prefix = checkpoints.export_google_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    expected = {m.name: m.variable.numpy() for m in checkpoints.model_mappings(model)}
    with tf.Graph().as_default():
        variables = {name: tf.compat.v1.get_variable(name, value.shape)
                     for name, value in expected.items()}
        tf.compat.v1.train.init_from_checkpoint(prefix, {"bert/": "bert/", "cls/": "cls/"})
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for name, value in zip(variables, sess.run(list(variables.values()))):
                np.testing.assert_array_equal(value, expected[name], err_msg=name)
            sess.run([v.initializer for v in variables.values()])
            tf.compat.v1.train.Saver(variables).restore(sess, prefix)
            np.testing.assert_array_equal(sess.run(variables["bert/pooler/dense/kernel"]),
                                          expected["bert/pooler/dense/kernel"])


def test_original_training_checkpoint_ignores_optimizer_state(tmp_path, tiny_config):
    """A checkpoint as the original's training writes it, by tf.compat.v1.train.Saver."""
    source = _randomize(models.classifier_model(tiny_config, 2))
    values = {m.name: m.variable.numpy() for m in checkpoints.model_mappings(source)}
    prefix = str(tmp_path / "model.ckpt-20")
    with tf.Graph().as_default():
        saved = [tf.compat.v1.Variable(v, name=n) for n, v in values.items()]
        saved += [tf.compat.v1.Variable(np.ones_like(v), name=f"{n}/adam_{s}")
                  for n, v in values.items() for s in "mv"]
        saved.append(tf.compat.v1.Variable(20, dtype=tf.int64, name="global_step"))
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            tf.compat.v1.train.Saver(saved).save(sess, prefix)
    model = models.classifier_model(tiny_config, 2)
    report = checkpoints.init_from_checkpoint(model, tmp_path)  # found through the state file
    assert (report.ignored, report.missing, report.unused) == (2 * len(values) + 1, [], [])
    features = _features(tiny_config)
    np.testing.assert_array_equal(source(features)["logits"], model(features)["logits"])


def _train_one_step(model, features):
    optimizer = keras.optimizers.Adam(1e-3)
    with tf.GradientTape() as tape:
        outputs = model(features, training=True)
        loss = (tf.reduce_sum(outputs["masked_lm_logits"][..., 0])
                + tf.reduce_sum(outputs["next_sentence_logits"]))
    variables = model.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return optimizer


def test_object_checkpoint_restores_encoder_and_heads(tmp_path, tiny_config):
    source = models.pretraining_model(tiny_config)
    features = _features(tiny_config)
    optimizer = _train_one_step(source, features)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=source, optimizer=optimizer, step=tf.Variable(1)), str(tmp_path), 2)
    manager.save()

    same = models.pretraining_model(tiny_config)
    report = checkpoints.init_from_checkpoint(same, tmp_path)
    assert (report.kind, report.missing, report.unused) == ("bert_tf", [], [])
    assert report.ignored > 2 * len(source.trainable_variables)  # Adam slots, step, counters
    for key in ("masked_lm_logits", "next_sentence_logits"):
        np.testing.assert_array_equal(source(features)[key], same(features)[key])

    classifier = models.classifier_model(tiny_config, 4)
    report = checkpoints.init_from_checkpoint(classifier, manager.latest_checkpoint)
    assert report.missing == ["output_weights", "output_bias"]
    assert "model/next_sentence/output_weights" in report.unused
    np.testing.assert_array_equal(source.encoder(features)["pooled_output"],
                                  classifier.encoder(features)["pooled_output"])

    encoder = BertEncoder(tiny_config)
    report = checkpoints.init_from_checkpoint(encoder, tmp_path)
    assert report.missing == [] and len(report.loaded) == len(encoder.weights)
    np.testing.assert_array_equal(source.encoder(features)["sequence_output"],
                                  encoder(features)["sequence_output"])


def test_encoder_object_checkpoint_into_classifier(tmp_path, tiny_config):
    encoder = _randomize(BertEncoder(tiny_config))
    path = tf.train.Checkpoint(model=encoder).save(str(tmp_path / "ckpt"))
    classifier = models.classifier_model(tiny_config, 2)
    report = checkpoints.init_from_checkpoint(classifier, path)
    assert report.missing == ["output_weights", "output_bias"]
    assert set(report.loaded) == {m.name for m in checkpoints.encoder_mappings(encoder)}
    features = _features(tiny_config)
    np.testing.assert_array_equal(encoder(features)["pooled_output"],
                                  classifier.encoder(features)["pooled_output"])


def test_wrong_config_names_the_weight_both_shapes_and_the_setting(tmp_path, tiny_config):
    checkpoints.export_google_checkpoint(BertEncoder(tiny_config), str(tmp_path / "bert_model.ckpt"))
    with pytest.raises(CheckpointError, match=r"bert/embeddings/word_embeddings has shape \[99, 32\] "
                       r"in the checkpoint but \[98, 32\] in the model.*vocab_size"):
        checkpoints.init_from_checkpoint(BertEncoder(tiny_config.replace(vocab_size=98)), tmp_path)
    with pytest.raises(CheckpointError, match=r"encoder weights are not in the checkpoint, e\.g\. "
                       r"bert/encoder/layer_2/.*has 2 encoder layers; check num_hidden_layers"):
        checkpoints.init_from_checkpoint(
            BertEncoder(tiny_config.replace(num_hidden_layers=3)), tmp_path)


def test_object_checkpoint_with_fewer_layers_is_an_error(tmp_path, tiny_config):
    path = tf.train.Checkpoint(model=BertEncoder(tiny_config)).save(str(tmp_path / "ckpt"))
    with pytest.raises(CheckpointError, match=r"encoder weights are not in the checkpoint.*layer_2"):
        checkpoints.init_from_checkpoint(BertEncoder(tiny_config.replace(num_hidden_layers=3)), path)


def test_head_of_another_shape_is_reported_not_loaded(tmp_path, tiny_config):
    """Fine-tuning from a checkpoint fine-tuned on another label set (MNLI → RTE)."""
    checkpoints.export_google_checkpoint(models.classifier_model(tiny_config, 3),
                                         str(tmp_path / "m.ckpt"))
    model = models.classifier_model(tiny_config, 2)
    before = model.classifier.output_weights.numpy()
    report = checkpoints.init_from_checkpoint(model, tmp_path / "m.ckpt.index")
    assert report.mismatched == ["output_weights [3, 32] ≠ [2, 32]", "output_bias [3] ≠ [2]"]
    np.testing.assert_array_equal(model.classifier.output_weights.numpy(), before)


def test_missing_pooler_is_reported_not_fatal(tmp_path, tiny_config):
    arrays = {m.name: m.variable.numpy() for m in checkpoints.model_mappings(BertEncoder(tiny_config))
              if "pooler" not in m.name}
    write_tf1_checkpoint(arrays, str(tmp_path / "bert_model.ckpt"))
    report = checkpoints.init_from_checkpoint(BertEncoder(tiny_config), tmp_path)
    assert report.missing == ["bert/pooler/dense/kernel", "bert/pooler/dense/bias"]
    assert "2 model weights NOT in the checkpoint" in str(report)


def test_path_errors(tmp_path, tiny_config):
    with pytest.raises(CheckpointError, match=r"nowhere/bert_model\.ckpt: no checkpoint found"):
        checkpoints.init_from_checkpoint(BertEncoder(tiny_config),
                                         tmp_path / "nowhere" / "bert_model.ckpt")
    with pytest.raises(CheckpointError, match="directory holds no checkpoint"):
        resolve_checkpoint(tmp_path)
    for name in ("a.ckpt", "b.ckpt"):
        write_tf1_checkpoint({"x": np.zeros(2, np.float32)}, str(tmp_path / name))
    with pytest.raises(CheckpointError, match=r"several checkpoints.*a\.ckpt, .*b\.ckpt"):
        resolve_checkpoint(tmp_path)


def test_write_into_existing_directory_leaves_no_temporary_files(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    write_tf1_checkpoint({"a/b": np.arange(3, dtype=np.float32)}, str(tmp_path / "x.ckpt"),
                         {"vocab.txt": "[PAD]\n"})
    assert sorted(os.listdir(tmp_path)) == ["keep.txt", "vocab.txt", "x.ckpt.data-00000-of-00001",
                                            "x.ckpt.index"]
    np.testing.assert_array_equal(tf.train.load_checkpoint(str(tmp_path / "x.ckpt")).get_tensor("a/b"),
                                  [0, 1, 2])


def test_hf_names_translate_to_original_names():
    assert hf_weights.tf1_name("bert.encoder.layer.11.attention.self.query.weight") == (
        "bert/encoder/layer_11/attention/self/query/kernel", True)
    assert hf_weights.tf1_name("encoder.layer.0.output.LayerNorm.bias") == (
        "bert/encoder/layer_0/output/LayerNorm/beta", False)
    assert hf_weights.tf1_name("embeddings.LayerNorm.gamma") == (
        "bert/embeddings/LayerNorm/gamma", False)
    assert hf_weights.tf1_name("bert.embeddings.token_type_embeddings.weight") == (
        "bert/embeddings/token_type_embeddings", False)
    assert hf_weights.tf1_name("pooler.dense.weight") == ("bert/pooler/dense/kernel", True)
    assert hf_weights.tf1_name("qa_outputs.weight") == ("cls/squad/output_weights", False)
    assert hf_weights.tf1_name("classifier.bias") == ("output_bias", False)
    assert hf_weights.tf1_name("lm_head.dense.weight") == (None, False)


def test_bert_config_from_hf_keeps_the_activation_function(tmp_path):
    (tmp_path / "config.json").write_text(
        '{"model_type": "bert", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, '
        '"num_attention_heads": 4, "intermediate_size": 37, "hidden_act": "gelu", '
        '"type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0}')
    config = hf_weights.bert_config_from_hf(tmp_path)
    assert (config.hidden_act, config.intermediate_size, config.type_vocab_size) == (
        "gelu_exact", 37, 2)
    (tmp_path / "config.json").write_text('{"model_type": "roberta", "vocab_size": 9}')
    with pytest.raises(ValueError, match="'roberta' is not BERT"):
        hf_weights.bert_config_from_hf(tmp_path / "config.json")


def _write_hf_directory(encoder, directory) -> None:
    """`encoder`'s weights as a Hugging Face BERT directory (config.json says "gelu")."""
    from safetensors.numpy import save_file  # noqa: PLC0415
    arrays = {m.name: m.variable.numpy() for m in checkpoints.encoder_mappings(encoder)}
    hf = {}
    for name, value in arrays.items():
        hf_name = (name.replace("bert/", "").replace("encoder/layer_", "encoder.layer.")
                   .replace("/", ".").replace("LayerNorm.gamma", "LayerNorm.weight")
                   .replace("LayerNorm.beta", "LayerNorm.bias"))
        if hf_name.endswith("_embeddings"):
            hf_name += ".weight"
        if hf_name.endswith(".kernel"):  # PyTorch Linear weights are [out, in]
            hf_name, value = hf_name.replace(".kernel", ".weight"), value.T
        hf[hf_name] = np.ascontiguousarray(value)
    save_file(hf, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(
        '{"model_type": "bert", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, '
        '"num_attention_heads": 4, "intermediate_size": 37, "hidden_act": "gelu", '
        '"max_position_embeddings": 64, "type_vocab_size": 2}')


def test_hf_directory_with_another_gelu_warns(tmp_path, tiny_config, caplog):
    """Hugging Face "gelu" is the erf form: a model built with our (tanh) "gelu" is told so."""
    encoder = BertEncoder(tiny_config)
    _write_hf_directory(encoder, tmp_path)
    again = BertEncoder(tiny_config)
    report = checkpoints.init_from_checkpoint(again, tmp_path)
    assert (report.kind, report.missing, report.unused) == ("huggingface", [], [])
    assert "activation bert_tf calls 'gelu_exact' but the model uses 'gelu'" in caplog.text
    for a, b in zip(encoder.weights, again.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_hf_directory_on_a_remote_file_system_loads_the_same_weights(tmp_path, tiny_config):
    """gs:// (tested as ram://): the directory is found, its config read and its safetensors
    file read whole; a config it cannot use is one error naming the remote file."""
    encoder = BertEncoder(tiny_config)
    _write_hf_directory(encoder, tmp_path)
    remote = f"ram://hf_{uuid.uuid4().hex}"
    for name in ("config.json", "model.safetensors"):
        tf.io.gfile.copy(str(tmp_path / name), f"{remote}/{name}")
    again = BertEncoder(tiny_config)
    report = checkpoints.init_from_checkpoint(again, remote)
    assert (report.kind, report.missing, report.unused) == ("huggingface", [], [])
    for a, b in zip(encoder.weights, again.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    assert hf_weights.bert_config_from_hf(remote).intermediate_size == 37
    tf.io.gfile.makedirs(f"{remote}/bad")
    with tf.io.gfile.GFile(f"{remote}/bad/config.json", "w") as f:
        f.write('{"model_type": "bert", "vocab_size": 99, "hidden_size": 30, '
                '"num_attention_heads": 4}')
    with pytest.raises(ValueError, match=f"^{remote}/bad/config.json: .*hidden_size"):
        hf_weights.bert_config_from_hf(f"{remote}/bad")
    with tf.io.gfile.GFile(f"{remote}/broken/config.json", "w") as f:
        f.write('{"model_type": "bert",')
    with pytest.raises(ValueError, match=f"^{remote}/broken/config.json: not valid JSON"):
        hf_weights.bert_config_from_hf(f"{remote}/broken")
