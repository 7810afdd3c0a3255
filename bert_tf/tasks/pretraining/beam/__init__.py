"""create_pretraining_data on Apache Beam (DirectRunner, Dataflow, Flink, Spark): see `pipeline`.

Importing this package does not import Beam, so `--runner=beam` without the extra fails with one
line (`create_pretraining_data_on_beam`) instead of a traceback.
May import the pretraining task's modules and infrastructure.
"""

from __future__ import annotations

import importlib.util

from bert_tf.errors import UserError

BEAM_EXTRA_MISSING = ("--runner=beam needs the 'beam' extra (apache-beam): "
                      "pip install -e '.[cpu,beam]'")


class BeamMissingError(UserError):
    """apache-beam is not installed (the message names the extra)."""


def create_pretraining_data_on_beam(config, pipeline_options: str = ""):
    """Runs `bert_tf.tasks.pretraining.beam.pipeline.create_pretraining_data_on_beam`; `BeamMissingError` (naming
    the extra) when apache-beam is not installed."""
    if importlib.util.find_spec("apache_beam") is None:
        raise BeamMissingError(BEAM_EXTRA_MISSING)
    from bert_tf.tasks.pretraining.beam import pipeline

    return pipeline.create_pretraining_data_on_beam(config, pipeline_options)
