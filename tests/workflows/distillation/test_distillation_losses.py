"""TinyBERT's losses against numpy written out by hand on a tiny teacher-student pair: the
encoder's attention scores, attention MSE over the real (query, key) pairs, hidden MSE through
the projection, soft cross-entropy with a temperature; a copy of the teacher as its own student
gives zero intermediate loss; the layer map; the student's config."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.model.config import BertConfig
from bert_tf.model.electra.config import ElectraConfig
from bert_tf.tasks.classifier.task import ClassifierTask
from bert_tf.workflows.distillation import losses
from bert_tf.workflows.distillation.student import (check_same_labels, copy_teacher_layers,
                                                    student_config)
from bert_tf.workflows.distillation.task import DistillationTask, prediction_term

TEACHER = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)
STUDENT = dataclasses.replace(TEACHER, hidden_size=20, num_hidden_layers=2, intermediate_size=23)
LENGTHS = [13, 9, 4, 11, 13, 6, 2]  # real tokens of each of the 7 rows; S = 13


def _features(seed: int = 0) -> dict:
    rng = np.random.RandomState(seed)
    mask = (np.arange(13)[None, :] < np.array(LENGTHS)[:, None]).astype(np.int32)  # [7,13]
    return {"input_ids": tf.constant(rng.randint(1, 99, (7, 13)) * mask, tf.int32),
            "input_mask": tf.constant(mask), "segment_ids": tf.constant(
                (np.arange(13)[None, :] >= 5).astype(np.int32) * mask),
            "label_ids": tf.constant(rng.randint(0, 3, 7), tf.int32),
            "is_real_example": tf.constant([1, 1, 1, 1, 1, 1, 0], tf.int32)}


def _task(student: BertConfig, stage: str, teacher_model=None, **kwargs) -> DistillationTask:
    tf.keras.utils.set_random_seed(1)
    teacher = teacher_model or ClassifierTask(TEACHER, 3).build_model()
    base = ClassifierTask(student, 3)
    return DistillationTask(base, lambda: teacher, stage, prediction_term(base.soft_targets()),
                            **kwargs)


@pytest.fixture(scope="module")
def intermediate():
    task = _task(STUDENT, "intermediate")
    student = task.build_model()
    features = _features()
    outputs = task.forward(student, features, training=False)
    return task, student, features, outputs


def _numpy_scores(block, x: np.ndarray, heads: int) -> np.ndarray:
    """[B,S,H] block input → [B,N,S,S] q·k/√D, computed from the block's own weights."""
    def project(dense):
        return x @ dense.kernel.numpy() + dense.bias.numpy()  # [B,S,H]
    q, k = project(block.query), project(block.key)
    b, s, h = q.shape
    q = q.reshape(b, s, heads, h // heads).transpose(0, 2, 1, 3)
    k = k.reshape(b, s, heads, h // heads).transpose(0, 2, 1, 3)
    return q @ k.transpose(0, 1, 3, 2) / np.sqrt(h // heads)


def test_encoder_scores_are_the_scaled_query_key_products(intermediate):
    task, student, features, outputs = intermediate
    mask = features["input_mask"].numpy().astype(bool)
    pairs = mask[:, None, :, None] & mask[:, None, None, :]  # [B,1,S,S]
    # Student layer 0 reads the embeddings; teacher layer 3 (the map's second) reads layer 2.
    expected = _numpy_scores(student.encoder.layer_0,
                             student.encoder(features)["embedding_output"].numpy(), 4)
    got = outputs["student_scores"][0].numpy()
    np.testing.assert_allclose(np.where(pairs, got, 0), np.where(pairs, expected, 0), atol=1e-4)
    teacher_out = task.teacher.encoder(features)
    expected = _numpy_scores(task.teacher.encoder.layer_3,
                             teacher_out["encoder_outputs"][2].numpy(), 4)
    np.testing.assert_allclose(np.where(pairs, outputs["teacher_scores"][1].numpy(), 0),
                               np.where(pairs, expected, 0), atol=1e-4)
    assert task.layer_map == [1, 3]


def test_intermediate_losses_equal_numpy(intermediate):
    task, student, features, outputs = intermediate
    terms = task.losses(features, outputs)
    weights = task.loss_normalizers(features)
    # Real tokens of real examples (the 7th row is a padding example).
    mask = features["input_mask"].numpy() * features["is_real_example"].numpy()[:, None]
    attention = 0.0
    for s, t in zip(outputs["student_scores"], outputs["teacher_scores"]):
        per_layer, pairs = 0.0, 0
        for b in range(7):
            n = int(mask[b].sum())
            per_layer += ((s.numpy()[b, :, :n, :n] - t.numpy()[b, :, :n, :n]) ** 2).sum()
            pairs += 4 * n * n
        attention += per_layer / pairs
    np.testing.assert_allclose(float(terms["attention"] / weights["attention"]), attention,
                               rtol=1e-5)
    # Hidden: the student's embeddings and layers through its projection [20→32].
    encoder_out = student.encoder(features)
    projection = student.distillation_projection
    kernel, bias = projection.kernel.numpy(), projection.bias.numpy()
    assert kernel.shape == (20, 32)
    teacher_out = task.teacher.encoder(features)
    states = [(encoder_out["embedding_output"], teacher_out["embedding_output"]),
              (encoder_out["encoder_outputs"][0], teacher_out["encoder_outputs"][1]),
              (encoder_out["encoder_outputs"][1], teacher_out["encoder_outputs"][3])]
    hidden = 0.0
    for s, t in states:
        difference = s.numpy() @ kernel + bias - t.numpy()  # [B,S,32]
        hidden += (mask[..., None] * difference ** 2).sum() / (32 * mask.sum())
    np.testing.assert_allclose(float(terms["hidden"] / weights["hidden"]), hidden, rtol=1e-5)


def test_soft_losses_with_temperature_equal_numpy():
    rng = np.random.RandomState(3)
    student, teacher = rng.randn(7, 3) * 2, rng.randn(7, 3) * 2
    t = 2.5

    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    expected = -(softmax(teacher / t) * np.log(softmax(student / t))).sum(axis=-1)
    np.testing.assert_allclose(losses.soft_cross_entropy(student, teacher, t).numpy(), expected,
                               rtol=1e-5)
    p, q = 1 / (1 + np.exp(-teacher / t)), 1 / (1 + np.exp(-student / t))
    expected = -(p * np.log(q) + (1 - p) * np.log(1 - q)).mean(axis=-1)
    np.testing.assert_allclose(losses.soft_binary_cross_entropy(student, teacher, t).numpy(),
                               expected, rtol=1e-5)
    np.testing.assert_allclose(losses.squared_error(student[:, :1], teacher[:, :1]).numpy(),
                               (student[:, 0] - teacher[:, 0]) ** 2, rtol=1e-5)


def test_prediction_stage_mixes_soft_and_gold_losses_by_alpha():
    task = _task(STUDENT, "prediction", temperature=2.0, alpha=0.25)
    student = task.build_model()
    assert not hasattr(student, "distillation_projection")
    features = _features(1)
    outputs = task.forward(student, features, training=False)
    terms, weights = task.losses(features, outputs), task.loss_normalizers(features)
    s, t = outputs["logits"].numpy(), outputs["teacher"]["logits"].numpy()
    real = features["is_real_example"].numpy().astype(bool)
    soft = losses.soft_cross_entropy(s, t, 2.0).numpy()[real].mean()
    gold = -np.log(tf.nn.softmax(s).numpy()[np.arange(7), features["label_ids"].numpy()])[real]
    np.testing.assert_allclose(float(terms["distillation"] / weights["distillation"]),
                               0.25 * soft, rtol=1e-5)
    np.testing.assert_allclose(float(terms["classifier"] / weights["classifier"]),
                               0.75 * gold.mean(), rtol=1e-5)


def test_a_copy_of_the_teacher_teaches_itself_nothing():
    teacher = ClassifierTask(TEACHER, 3).build_model()
    copy = dataclasses.replace(TEACHER)
    task = _task(copy, "intermediate", teacher_model=teacher, initialise_from_teacher=True)
    student = task.build_model()
    features = _features(2)
    terms = task.losses(features, task.forward(student, features, training=False))
    assert float(terms["attention"]) < 1e-6 and float(terms["hidden"]) < 1e-6
    # Nothing copied: the same pair is far apart.
    task = _task(copy, "intermediate", teacher_model=teacher)
    student = task.build_model()
    assert float(task.losses(features, task.forward(student, features, training=False))
                 ["hidden"]) > 1.0


def test_fewer_layers_copy_the_mapped_teacher_layers():
    teacher = ClassifierTask(TEACHER, 3).build_model()
    student = ClassifierTask(student_config(TEACHER, None, 2), 3).build_model()
    copy_teacher_layers(student, teacher)
    for j, i in enumerate([1, 3]):
        np.testing.assert_array_equal(student.encoder.transformer_layers[j].query.kernel.numpy(),
                                      teacher.encoder.transformer_layers[i].query.kernel.numpy())
    np.testing.assert_array_equal(student.classifier.output_weights.numpy(),
                                  teacher.classifier.output_weights.numpy())
    np.testing.assert_array_equal(student.encoder.embeddings.word_embeddings.numpy(),
                                  teacher.encoder.embeddings.word_embeddings.numpy())


def test_an_electra_teacher_without_pooler_is_copied_into_fewer_layers():
    config = ElectraConfig(**{**dataclasses.asdict(TEACHER), "embedding_size": 16})
    teacher = ClassifierTask(config, 3).build_model()
    student = ClassifierTask(student_config(config, None, 2), 3).build_model()
    assert teacher.encoder.pooler is None and student.encoder.pooler is None
    copy_teacher_layers(student, teacher)
    np.testing.assert_array_equal(student.encoder.transformer_layers[1].query.kernel.numpy(),
                                  teacher.encoder.transformer_layers[3].query.kernel.numpy())
    np.testing.assert_array_equal(student.encoder.embeddings.embeddings_project.kernel.numpy(),
                                  teacher.encoder.embeddings.embeddings_project.kernel.numpy())


def test_layer_map_and_its_errors():
    assert losses.layer_map(4, 12) == [2, 5, 8, 11]
    assert losses.layer_map(6, 6) == list(range(6))
    with pytest.raises(UserError, match="must divide the teacher's 12"):
        losses.layer_map(5, 12)
    with pytest.raises(UserError, match="give one of --student_config"):
        student_config(TEACHER, None, None)
    with pytest.raises(UserError, match=r"labels \['b', 'a'\] differ"):
        check_same_labels(["a", "b"], ["b", "a"], "teacher/label_list.txt", "data")
