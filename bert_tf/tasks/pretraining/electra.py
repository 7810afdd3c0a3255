"""ELECTRA's replaced-token detection (`run_pretraining.py --objective=electra`), as
google-research/electra's `run_pretraining.py` computes it, on the records and through the loop
that masked-LM pretraining uses.

Per step: the records' masks (ELECTRA's: 85% [MASK], 15% kept, drawn as the batch is read, see
`dynamic_masking.ELECTRA_REPLACEMENT`), a generator of `generator_hidden_size` × the
discriminator's width sharing its embeddings predicts the masked tokens, samples (Gumbel noise,
no gradient) replace them, and the discriminator labels every real token replaced or not:

  loss = Σ w·CE_gen / (Σ w + 1e-6) + disc_weight · Σ m·BCE_disc / (Σ m + 1e-6)

(w: masked_lm_weights, m: input_mask; a sampled token equal to the original is not replaced).
No next-sentence loss.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import tensorflow as tf

from bert_tf.model import losses
from bert_tf.model.config import ConfigError
from bert_tf.model.electra.config import ElectraConfig
from bert_tf.model.electra.modeling import ElectraPretrainingModel
from bert_tf.training import loop as training, roc_auc

# google-research/electra adds 1e-6 to both denominators.
ELECTRA_EPSILON = 1e-6
DISC_WEIGHT = 50.0
GENERATOR_HIDDEN_SIZE = 0.25
# eval_results.txt's keys (the loop's results: "<term>_loss" and the metrics).
METRIC_NAMES = ("loss", "masked_lm_loss", "replaced_token_loss", "masked_lm_accuracy",
                "sampled_masked_lm_accuracy", "disc_accuracy", "disc_precision", "disc_recall",
                "disc_auc", "replaced_fraction")


def _weighted(values: tf.Tensor, weights: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    weights = tf.cast(weights, tf.float32)
    return tf.reduce_sum(weights * tf.cast(values, tf.float32)), tf.reduce_sum(weights)


class ElectraTask(training.Task):
    """Generator masked LM + disc_weight × replaced-token detection (module docstring)."""

    loss_epsilons = {"masked_lm": ELECTRA_EPSILON, "replaced_token": ELECTRA_EPSILON}

    def __init__(self, config: ElectraConfig, generator_hidden_size: float = GENERATOR_HIDDEN_SIZE,
                 disc_weight: float = DISC_WEIGHT):
        if not hasattr(config, "generator"):  # the config that describes the generator too
            raise ConfigError("--objective=electra needs an ELECTRA config (\"model_type\": "
                              "\"electra\", e.g. --electra_config_file=electra_config.json)")
        self.config = config
        self.generator_config = config.generator(generator_hidden_size)
        self.disc_weight = disc_weight

    def build_model(self):
        return ElectraPretrainingModel(self.config, self.generator_config)

    def loss_normalizers(self, features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return {"masked_lm": tf.reduce_sum(features["masked_lm_weights"]),
                "replaced_token": tf.reduce_sum(tf.cast(features["input_mask"], tf.float32))}

    def losses(self, features, outputs) -> dict[str, tf.Tensor]:
        masked_lm = losses.masked_lm_loss(outputs["masked_lm_logits"], features["masked_lm_ids"],
                                          features["masked_lm_weights"])
        per_token = tf.nn.sigmoid_cross_entropy_with_logits(
            labels=tf.cast(outputs["replaced"], tf.float32),
            logits=outputs["discriminator_logits"])  # [B,S]
        replaced_token, _ = _weighted(per_token, features["input_mask"])
        return {"masked_lm": masked_lm.total, "replaced_token": self.disc_weight * replaced_token}

    def metrics(self, features, outputs) -> dict[str, tuple[tf.Tensor, tf.Tensor]]:
        """google-research/electra's: the generator's accuracy (argmax and sampled), the
        discriminator's accuracy over real tokens, precision and recall of "replaced"."""
        weights = features["masked_lm_weights"]
        ids = features["masked_lm_ids"]
        predicted = tf.argmax(outputs["masked_lm_logits"], -1, output_type=tf.int32)
        mask = tf.cast(features["input_mask"], tf.float32)
        labels = outputs["replaced"]
        preds = tf.cast(outputs["discriminator_logits"] > 0, tf.int32)
        correct = tf.equal(preds, labels)
        return {
            "masked_lm_accuracy": _weighted(tf.equal(predicted, ids), weights),
            "sampled_masked_lm_accuracy": _weighted(tf.equal(outputs["sampled_ids"], ids), weights),
            "disc_accuracy": _weighted(correct, mask),
            "disc_precision": _weighted(correct, mask * tf.cast(preds, tf.float32)),
            "disc_recall": _weighted(correct, mask * tf.cast(labels, tf.float32)),
            "replaced_fraction": _weighted(labels, mask),
        }

    def counts(self, features, outputs) -> dict[str, tf.Tensor]:
        """The histogram of google-research/electra's `disc_auc`: its call,
        `tf.metrics.auc(labels * input_mask, probs * input_mask)`, counts every position, the
        padding as not replaced at probability 0."""
        mask = tf.cast(features["input_mask"], tf.float32)
        probabilities = tf.sigmoid(tf.cast(outputs["discriminator_logits"], tf.float32))
        return {"disc_roc": roc_auc.roc_histogram(tf.cast(outputs["replaced"], tf.float32) * mask,
                                                  probabilities * mask)}

    def metrics_from_counts(self, counts: Mapping[str, np.ndarray]) -> dict[str, float]:
        return {"disc_auc": roc_auc.roc_auc(counts["disc_roc"])}
