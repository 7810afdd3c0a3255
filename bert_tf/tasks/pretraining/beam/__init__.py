"""create_pretraining_data on Apache Beam (DirectRunner, Dataflow, Flink, Spark): see `pipeline`.

Importing this package does not import Beam, so `--runner=beam` without the extra fails with one
line (`create_pretraining_data_on_beam`) instead of a traceback.
May import the pretraining task's modules and infrastructure.
"""

from __future__ import annotations

import importlib.util
import logging

from bert_tf.errors import UserError

BEAM_EXTRA_MISSING = ("--runner=beam needs the 'beam' extra (apache-beam): "
                      "pip install -e '.[cpu,beam]'")


class BeamMissingError(UserError):
    """apache-beam is not installed (the message names the extra)."""


# Beam's options that set its workers' log levels: given, they are the user's choice.
BEAM_LOG_OPTIONS = ("--default_sdk_harness_log_level", "--sdk_harness_log_level_overrides")


def create_pretraining_data_on_beam(config, pipeline_options: str = "",
                                    beam_log_level: int | None = logging.WARNING):
    """Runs `pipeline.create_pretraining_data_on_beam`; `BeamMissingError` (naming the extra)
    when apache-beam is not installed.

    `beam_log_level`: the level of Beam's own loggers, here and (unless `pipeline_options` set
    Beam's log options) in its SDK workers; the default keeps the runner's INFO lines
    (type hints, the job service, workers) off the progress line. None leaves Beam's logging
    as it is.
    """
    if importlib.util.find_spec("apache_beam") is None:
        raise BeamMissingError(BEAM_EXTRA_MISSING)
    if beam_log_level is not None:
        logging.getLogger("apache_beam").setLevel(beam_log_level)
        if not any(option in pipeline_options for option in BEAM_LOG_OPTIONS):
            level = logging.getLevelName(beam_log_level)
            pipeline_options = f"{pipeline_options} {BEAM_LOG_OPTIONS[0]}={level}".strip()
    from bert_tf.tasks.pretraining.beam import pipeline

    return pipeline.create_pretraining_data_on_beam(config, pipeline_options)
