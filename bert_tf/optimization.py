"""The original optimization.py's names, for code written against it
(`from bert_tf import optimization`).

Nothing is implemented here. The optimizers are `bert_tf.training.optimizers`, the warm-up
schedule `bert_tf.training.schedules`; the original's `AdamWeightDecayOptimizer` and its
loss-first `create_optimizer` call are `bert_tf.training.optimizer_compat` (docs/migrating.md).
"""

from bert_tf.training.optimizer_compat import (AdamWeightDecayOptimizer, TrainOp,
                                               create_optimizer, create_train_op)
from bert_tf.training.optimizers import AdamWeightDecay, Lamb
from bert_tf.training.schedules import WarmupLinearSchedule

__all__ = ["AdamWeightDecay", "AdamWeightDecayOptimizer", "Lamb", "TrainOp", "WarmupLinearSchedule",
           "create_optimizer", "create_train_op"]
