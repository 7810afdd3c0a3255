"""bert_tf: BERT pretraining and fine-tuning on TensorFlow 2 and Keras 3.

One folder per family (model, text, checkpoints, records, training, tasks/<task>, serving) beside
the original's module names and the shared infrastructure; docs/architecture.md says who may import
whom.
"""

import importlib.util as _importlib_util

# Checked without importing: TensorFlow costs ~2.7 s and ~490 MB per process, and the TF-free parts
# (tokenization, sample text, the pretraining-data workers) must not pay that in every worker.
if _importlib_util.find_spec("tensorflow") is None:
    raise ImportError(
        "bert_tf needs TensorFlow 2.21+: run `pip install 'tensorflow-cpu>=2.21'` "
        "(GPU: `pip install 'tensorflow[and-cuda]>=2.21'`; TPU VM: `pip install tensorflow-tpu`)."
    ) from None

__version__ = "0.1.0"
