"""The TF_CONFIG environment variable, read in one place (no TensorFlow: the run lock reads it
in scripts that never load TensorFlow).

Multi-worker training names the cluster and this process's task in TF_CONFIG (docs/training.md).
Two readers: `distribution.default_strategy_name` (a cluster of more than one task picks
multi_worker_mirrored) and `bert_tf.cli.run_lock` (only the chief takes the lock).
"""

from __future__ import annotations

import json
import os
from typing import Any


def tf_config() -> dict[str, Any]:
    """TF_CONFIG's JSON ({} when unset or empty).

    Raises:
      ValueError: TF_CONFIG is not JSON (json.JSONDecodeError).
    """
    return json.loads(os.environ.get("TF_CONFIG") or "{}")
