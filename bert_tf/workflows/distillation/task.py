"""The teacher-student task the training loop runs in place of a fine-tuning task.

`DistillationTask(base, ...)` wraps a task's loop task (`bert_tf.tasks.finetuning.EncoderTask`:
its model, gold-label loss and metrics) so that the one loop trains the student with TinyBERT's
losses (`losses.py`); the teacher is frozen, built once in the strategy's scope and never saved in
the student's checkpoints. Two stages:

- "intermediate": attention-score and hidden-state MSE between student layer j and teacher layer
  `layer_map(...)[j]`, embeddings with embeddings; a learned projection (the model attribute
  `distillation_projection`, saved with the stage's checkpoints) when the widths differ;
- "prediction": the soft loss on the outputs the task declares (`prediction_term` of its
  `soft_targets()`: per example, per token for NER, start and end for SQuAD), weighted `alpha`,
  plus the task's own gold-label loss weighted 1 − alpha.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

import keras
import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.model.encoder import Dense
from bert_tf.model.inputs import MODEL_INPUTS
from bert_tf.tasks import finetuning
from bert_tf.training import loop as training
from bert_tf.workflows.distillation import losses
from bert_tf.workflows.distillation.student import check_heads, copy_teacher_layers

STAGES = ("intermediate", "prediction")


@dataclasses.dataclass(frozen=True)
class PredictionTerm:
    """The prediction stage's soft loss for one task's outputs.

    `loss(features, student_outputs, teacher_outputs, temperature)` is Σ w·ℓ over the batch and
    `weight(features)` Σ w.
    """

    loss: Callable[..., tf.Tensor]
    weight: Callable[[Mapping[str, tf.Tensor]], tf.Tensor]


_ROW_LOSSES = {  # SoftTargets.kind → (student, teacher, temperature) → loss per row
    "softmax": losses.soft_cross_entropy,
    "sigmoid": losses.soft_binary_cross_entropy,
    "squared_error": lambda student, teacher, temperature: losses.squared_error(student, teacher),
}


def prediction_term(targets: finetuning.SoftTargets) -> PredictionTerm:
    """The soft loss of a task's outputs (`EncoderTask.soft_targets`): soft cross-entropy per
    example or token, soft sigmoids for multi-label, MSE for regression; the mean over several
    outputs (SQuAD's start and end)."""
    row_loss = _ROW_LOSSES[targets.kind]

    def loss(features, student, teacher, temperature):
        per_row = [row_loss(student[name], teacher[name], temperature)
                   for name in targets.outputs]
        total = per_row[0] if len(per_row) == 1 else tf.add_n(per_row)
        if targets.weights is not None:
            total = targets.weights(features) * total
        summed = tf.reduce_sum(total)
        return summed if len(per_row) == 1 else summed / float(len(per_row))

    def weight(features):
        if targets.weights is None:
            return tf.cast(tf.shape(features["input_ids"])[0], tf.float32)
        return tf.reduce_sum(targets.weights(features))

    return PredictionTerm(loss, weight)


class DistillationTask(training.Task):
    """A loop task training `base`'s model as the student of a frozen teacher.

    Args:
      base: the fine-tuning task whose model (over the student's config) is the student.
      load_teacher: builds and restores the teacher's model (called once, in the strategy's
        scope, when the loop builds the student).
      stage: "intermediate" or "prediction".
      prediction_term: the soft loss of the task's outputs (prediction stage).
      temperature, alpha: the prediction stage's temperature and the soft loss's weight (the
        gold-label loss weighs 1 − alpha).
      initialise_from_teacher: copy the teacher's weights into the new student
        (`copy_teacher_layers`) before a checkpoint of the run, if any, is restored.
    """

    def __init__(self, base: finetuning.EncoderTask, load_teacher: Callable[[], keras.Model],
                 stage: str, prediction_term: PredictionTerm | None = None,
                 temperature: float = 1.0, alpha: float = 1.0,
                 initialise_from_teacher: bool = False):
        if stage not in STAGES:
            raise UserError(f"--stages: unknown stage {stage!r}; expected {', '.join(STAGES)}")
        if not 0.0 <= alpha <= 1.0 or temperature <= 0.0:
            raise UserError(f"--alpha must be in [0, 1] and --temperature positive, got "
                            f"{alpha} and {temperature}")
        self.base, self.stage, self.prediction_term = base, stage, prediction_term
        self.temperature, self.alpha = temperature, alpha
        self._load_teacher, self._initialise = load_teacher, initialise_from_teacher
        self.teacher: keras.Model | None = None
        self.layer_map: list[int] = []
        self.learning_rate_multipliers = base.learning_rate_multipliers

    def build_model(self) -> keras.Model:
        if self.teacher is None:
            self.teacher = self._load_teacher()
            self.teacher.trainable = False
        student = self.base.build_model()
        student_config, teacher_config = student.config, self.teacher.config
        self.layer_map = losses.layer_map(student_config.num_hidden_layers,
                                          teacher_config.num_hidden_layers)
        if self._initialise:
            copy_teacher_layers(student, self.teacher)
        if self.stage == "intermediate":
            check_heads(student_config, teacher_config)
            if student_config.hidden_size != teacher_config.hidden_size:
                # TinyBERT's fit_dense: the student's states → the teacher's width.
                student.distillation_projection = Dense(
                    student_config, teacher_config.hidden_size, student_config.hidden_size,
                    name="distillation_projection", dtype=student.dtype_policy)
        return student

    def forward(self, model, features, training, static_shapes=False):
        if self.stage == "prediction":  # both models as the task runs its own
            teacher = self.base.forward(self.teacher, features, training=False,
                                        static_shapes=static_shapes)
            return {**self.base.forward(model, features, training=training,
                                        static_shapes=static_shapes),
                    "teacher": tf.nest.map_structure(tf.stop_gradient, teacher)}
        rows = self.base.encoder_rows(features)
        inputs = {name: rows[name] for name in MODEL_INPUTS}
        student = model.encoder(inputs, training=training, output_attention_scores=True,
                                static_shapes=static_shapes)
        teacher = self.teacher.encoder(inputs, training=False, output_attention_scores=True,
                                       static_shapes=static_shapes)
        teacher = tf.nest.map_structure(tf.stop_gradient, teacher)
        projection = getattr(model, "distillation_projection", None)
        student_states = [student["embedding_output"], *student["encoder_outputs"]]
        return {
            "student_scores": student["attention_scores"],
            "teacher_scores": [teacher["attention_scores"][i] for i in self.layer_map],
            "student_states": (student_states if projection is None
                               else [projection(state) for state in student_states]),
            "teacher_states": [teacher["embedding_output"],
                               *(teacher["encoder_outputs"][i] for i in self.layer_map)],
        }

    def _mask(self, features) -> tf.Tensor:
        rows = self.base.encoder_rows(features)
        return losses.token_mask(rows["input_mask"], rows.get("is_real_example"))

    def loss_normalizers(self, features):
        if self.stage == "intermediate":
            mask = self._mask(features)
            return {"attention": losses.attention_weight(mask, self.teacher.config
                                                         .num_attention_heads),
                    "hidden": losses.hidden_weight(mask, self.teacher.config.hidden_size)}
        weights = {"distillation": self.prediction_term.weight(features)}
        if self.alpha < 1.0:
            weights.update(self.base.loss_normalizers(features))
        return weights

    def losses(self, features, outputs):
        if self.stage == "intermediate":
            mask = self._mask(features)
            return {"attention": losses.attention_loss(outputs["student_scores"],
                                                       outputs["teacher_scores"], mask),
                    "hidden": losses.hidden_loss(outputs["student_states"],
                                                 outputs["teacher_states"], mask)}
        terms = {"distillation": self.alpha * self.prediction_term.loss(
            features, outputs, outputs["teacher"], self.temperature)}
        if self.alpha < 1.0:
            terms.update({name: (1.0 - self.alpha) * value
                          for name, value in self.base.losses(features, outputs).items()})
        return terms

    def metrics(self, features, outputs):
        return self.base.metrics(features, outputs) if self.stage == "prediction" else {}
