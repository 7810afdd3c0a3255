"""create_pretraining_data as an Apache Beam pipeline: the same blocks, the same bytes, any runner.

    blocks (planned here, as the local path does) ─Reshuffle─▶ EncodeBlock (BlockWorker.write_block:
    tokenize, instances, masks, records; one in-memory part per output file)
      ├─▶ (output k, block's part) ─GroupByKey─▶ WriteOutput: parts' 256-record runs in the local
      │     path's seeded order (`merge_order`) ─▶ its temporary
      └─▶ counts ─CombineGlobally(Summary)─▶ `.<output>.beam-summary.json`
    then, here, once the pipeline succeeded: every temporary (`filesystem.temporary_beside`, named
    here) is renamed to its final name.

A block's records depend only on (random seed, block index) and each output is assembled in the
same order as the local path's merge, so every output file is byte-identical to the local path's
for the same inputs and flags, whatever the runner and the number of Beam workers. One output
file is assembled by one worker, in memory: shard the output (`--output_file=out/x.tfrecord@N`) so
that a shard fits in a worker's memory. Beam retries failed bundles itself; a failed job is re-run
whole (the local path's block-level resume does not apply).
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from typing import Iterable, Iterator

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from bert_tf import filesystem
from bert_tf.errors import EmptyInputError
from bert_tf.tasks.pretraining import outputs as pretraining_output
from bert_tf.tasks.pretraining.inputs import Block, ReadCounts
from bert_tf.tasks.pretraining.pipeline import (BlockWorker, PretrainingDataConfig, Summary,
                                                no_instances_message, plan_run)

_COUNTS = "counts"


class EncodeBlock(beam.DoFn):
    """Block -> (output index, (block index, part bytes, piece boundaries)) per output file, and the
    block's counts on the `counts` output."""

    def __init__(self, config: PretrainingDataConfig, num_outputs: int):
        self.config = config
        self.num_outputs = num_outputs
        self.worker: BlockWorker | None = None

    def setup(self) -> None:
        # The tokenizer is built once per Beam worker, not per block; the vocabulary and the
        # inputs are read through Beam's file systems, as the launching process planned them.
        filesystem.prefer_beam()
        self.worker = BlockWorker(self.config, work_dir="", num_outputs=self.num_outputs)

    def process(self, block: Block) -> Iterator:
        parts = [pretraining_output.PartWriter(None) for _ in range(self.num_outputs)]
        counts = self.worker.write_block(block, parts)
        for k, part in enumerate(parts):
            yield k, (block.index, part.file.getvalue(), counts["pieces"][k])
        yield beam.pvalue.TaggedOutput(_COUNTS, {key: value for key, value in counts.items() if key != "pieces"})


class WriteOutput(beam.DoFn):
    """(output index, all blocks' parts for it) -> the output file's bytes under its temporary."""

    def __init__(self, temporaries: list[str], random_seed: int):
        self.temporaries = temporaries
        self.random_seed = random_seed

    def setup(self) -> None:
        filesystem.prefer_beam()

    def process(self, element: tuple[int, Iterable[tuple[int, bytes, list[int]]]]) -> Iterator[str]:
        k, parts = element
        data, boundaries = {}, {}
        for block, part, pieces in parts:
            data[block], boundaries[block] = memoryview(part), pieces
        path = self.temporaries[k]
        with filesystem.open_write(path) as f:
            for block, start, end in pretraining_output.merge_order(boundaries, self.random_seed, k):
                f.write(data[block][start:end])
        yield path


class SummaryFn(beam.CombineFn):
    """Blocks' counts -> the run's `Summary` totals, as a JSON-ready dict."""

    def create_accumulator(self) -> Summary:
        return Summary()

    def add_input(self, summary: Summary, counts: dict) -> Summary:
        summary.add_block(counts)
        return summary

    def merge_accumulators(self, summaries: Iterable[Summary]) -> Summary:
        summaries = iter(summaries)
        total = next(summaries)
        for summary in summaries:
            total.merge(summary)
        return total

    def extract_output(self, summary: Summary) -> dict:
        return dataclasses.asdict(summary)


def summary_path(outputs: list[str]) -> str:
    """Where the pipeline leaves its summary for the launching process (next to the first output)."""
    head, name = outputs[0].rsplit("/", 1) if "/" in outputs[0] else (".", outputs[0])
    return f"{head}/.{name}.beam-summary.json"


def build_pipeline(pipeline: beam.Pipeline, config: PretrainingDataConfig, blocks: list[Block],
                   outputs: list[str], temporaries: list[str]) -> None:
    """Adds the conversion of `blocks` into `outputs` (under `temporaries`) and the summary to `pipeline`."""
    encoded = (pipeline
               | "Blocks" >> beam.Create(blocks)
               | "Spread" >> beam.Reshuffle()  # blocks to all workers, not to the one that created them
               | "Encode" >> beam.ParDo(EncodeBlock(config, len(outputs))).with_outputs(_COUNTS, main="parts"))
    _ = (encoded.parts
         | "ByOutput" >> beam.GroupByKey()
         | "Write" >> beam.ParDo(WriteOutput(temporaries, config.random_seed)))
    _ = (encoded[_COUNTS]
         | "Summary" >> beam.CombineGlobally(SummaryFn())
         | "SaveSummary" >> beam.Map(_write_json, summary_path(outputs)))


# Beam's DirectRunner first tries its Prism runner, which it downloads on first use; on this
# pipeline it then falls back to the FnApiRunner. Naming the FnApiRunner directly runs the same
# thing without ever going to the network.
LOCAL_RUNNER_NAMES = ("directrunner", "direct")


def local_runner(options: PipelineOptions):
    """The runner to pass to `beam.Pipeline`: Beam's Python FnApiRunner when the options name no
    runner or the DirectRunner, else None (Beam builds the runner the options name).

    The FnApiRunner honours `--direct_num_workers` and `--direct_running_mode` as the DirectRunner
    does, and receives the options as the DirectRunner would hand them over.
    """
    name = options.view_as(StandardOptions).runner
    if name is not None and (not isinstance(name, str) or name.lower() not in LOCAL_RUNNER_NAMES):
        return None
    from apache_beam.portability.api import beam_provision_api_pb2  # noqa: PLC0415
    from apache_beam.runners.portability.fn_api_runner import fn_runner  # noqa: PLC0415
    from apache_beam.runners.portability.portable_runner import JobServiceHandle  # noqa: PLC0415

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    return fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))


def create_pretraining_data_on_beam(config: PretrainingDataConfig, pipeline_options: str = "") -> Summary:
    """Converts text files into pretraining TFRecords with Beam (see the module docstring).

    Args:
      config: the script's flags (`num_workers` and `progress` are the local path's: Beam's
        parallelism and progress come from the runner).
      pipeline_options: Beam's own command-line options, e.g. "--runner=DataflowRunner
        --project=P --region=R --temp_location=gs://B/tmp" (empty or --runner=DirectRunner:
        Beam's local FnApiRunner, see `local_runner`).
    Returns:
      The run's `Summary`, the same totals as the local path's. Bad flags and inputs raise
      ValueError/OSError naming the flag or file before the pipeline starts.
    """
    started = time.time()
    options = PipelineOptions(shlex.split(pipeline_options))
    FileSystems.set_options(options)  # credentials and endpoints of gs://, s3://, ... for planning too
    beam_was_preferred = filesystem.prefer_beam(True)
    try:
        inputs, outputs, blocks = plan_run(config)
        pretraining_output.make_output_directories(outputs)
        temporaries = [filesystem.temporary_beside(path) for path in outputs]
        try:
            with beam.Pipeline(runner=local_runner(options), options=options) as pipeline:
                build_pipeline(pipeline, config, blocks, outputs, temporaries)
            summary = _read_summary(summary_path(outputs)) if blocks else Summary()
            if not summary.instances:
                raise EmptyInputError(no_instances_message(inputs, summary,
                                                              config.task_text.input_format))
            for temporary, path in zip(temporaries, outputs):
                filesystem.replace(temporary, path)
        finally:
            filesystem.delete_any(*temporaries)
    finally:
        filesystem.prefer_beam(beam_was_preferred)
    summary.input_files, summary.output_files = len(inputs), outputs
    summary.dynamic_masking = config.dynamic_masking
    summary.elapsed_seconds = time.time() - started
    return summary


def _write_json(value: dict, path: str) -> None:
    filesystem.prefer_beam()  # runs on a Beam worker
    filesystem.write_atomically(path, json.dumps(value))


def _read_summary(path: str) -> Summary:
    values = pretraining_output.read_json(path)
    filesystem.delete(path)
    values["read"] = ReadCounts(**values["read"])
    return Summary(**values)
