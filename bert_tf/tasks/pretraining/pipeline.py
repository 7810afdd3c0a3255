"""Corpus-scale `create_pretraining_data`: parallel workers, bounded memory, resumable, deterministic.

The input is cut into blocks of at most `document_buffer_size` documents (`pretraining_input`).
Each block is processed on its own, by whichever worker takes it: tokenize, shuffle the documents,
`dupe_factor` passes of `create_instances_from_document` ("random next" segments come from the
same block), shuffle the instances, mask and write them round-robin into one part file per output
file. A block's random generators are seeded from (`random_seed`, block index), so its bytes never
depend on the number of workers. When every block is done, each output file is made of its
parts cut in runs of 256 records, all blocks' runs in a seeded random order (so readers see the
whole corpus mixed, as with the original's global shuffle); it appears under its final name only
when complete (`pretraining_output`).

A block's parts and a `done` marker (with its counts) are kept in a work directory next to the
first output until the run completes, so an interrupted run, re-run with the same flags, redoes
only the unfinished blocks and produces the same bytes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import json
import multiprocessing
import random
import sys
import threading
import time
from typing import Sequence

import numpy as np

from bert_tf import filesystem
from bert_tf.errors import EmptyInputError, UserError
from bert_tf.filesystem import expand_input_patterns, full_disk
from bert_tf.records import features, tfrecord
from bert_tf.tasks.pretraining import outputs as pretraining_output
from bert_tf.tasks.pretraining.inputs import Block, LineTokenizer, ReadCounts, plan_blocks
from bert_tf.tasks.pretraining.task_text import TaskTextOptions, plan_task_blocks
from bert_tf.tasks.pretraining.instances import (DocumentBuffer, InstanceOptions, SpecialIds,
                                                 assemble_features, create_instances,
                                                 create_masked_lm_predictions, unmasked_features)
from bert_tf.text.chinese.segmentation import make_line_preparer

# Bump when the bytes produced for the same flags change, so stale work directories are not reused.
FORMAT_VERSION = 1
_BATCH = 2048  # instances masked and encoded per numpy call
_TOKENIZER_CACHE = 4096


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
    """Everything `create_pretraining_data` needs (the script's flags)."""
    input_file: str
    output_file: str
    vocab_file: str | None = None
    spm_model_file: str | None = None
    do_lower_case: bool = True
    instance: InstanceOptions = InstanceOptions()
    random_seed: int = 12345
    dupe_factor: int = 10
    num_workers: int = 1
    document_buffer_size: int = 1000
    pre_segmented: bool = False
    progress: bool = True
    chinese_conversion: str = "none"  # t2s / s2t (bert_tf.text.chinese.conversion)
    chinese_segmenter: str | None = None  # "jieba": segment raw text, then as pre_segmented
    dynamic_masking: bool = False  # write unmasked instances; run_pretraining draws the masks
    task_text: TaskTextOptions = TaskTextOptions()  # the input's format: text, or a task's files


@dataclasses.dataclass
class Summary:
    """Totals over all blocks (see `create_pretraining_data`)."""
    input_files: int = 0
    output_files: list[str] = dataclasses.field(default_factory=list)
    blocks: int = 0
    documents: int = 0
    instances: int = 0
    tokens: int = 0  # non-padding tokens in the written sequences
    masked_positions: int = 0
    masked_as_mask: int = 0
    masked_kept: int = 0
    masked_random: int = 0
    short_instances: int = 0  # fewer tokens than half of max_seq_length
    random_next: int = 0  # label 1 (random next sentence, or swapped with --sentence_order)
    read: ReadCounts = dataclasses.field(default_factory=ReadCounts)
    elapsed_seconds: float = 0.0
    dynamic_masking: bool = False

    def add_block(self, counts: dict) -> None:
        self.blocks += 1
        for key, value in counts.items():
            if key in ("pieces", "parts", "block"):
                continue
            if key == "read":
                self.read.add(ReadCounts(**value))
            else:
                setattr(self, key, getattr(self, key) + value)

    def lines(self) -> list[str]:
        mb = self.read.bytes / 1e6
        seconds = max(self.elapsed_seconds, 1e-9)
        per = max(self.instances, 1)
        return [
            f"input: {self.input_files} files, {mb:.1f} MB, {self.read.lines:,} lines, "
            f"{self.documents:,} documents, {self.blocks} blocks",
            f"output: {self.instances:,} instances in {len(self.output_files)} files "
            f"({', '.join(self.output_files[:3])}{', ...' if len(self.output_files) > 3 else ''})",
            f"tokens: {self.tokens:,} ({self.tokens / per:.1f} per instance), "
            f"{100 * self.short_instances / per:.1f}% short, {100 * self.random_next / per:.1f}% label 1",
            (f"masked positions: {self.masked_positions:,} ({self.masked_positions / per:.2f} per instance; "
             f"{self._share(self.masked_as_mask)} [MASK], {self._share(self.masked_kept)} kept, "
             f"{self._share(self.masked_random)} random)") if not self.dynamic_masking else
            "masked positions: none written (--dynamic_masking: run_pretraining.py draws them)",
            f"invalid UTF-8 lines: {self.read.invalid_utf8_lines:,} (invalid bytes dropped); "
            f"over-long lines: {self.read.overlong_lines:,} (longer than a sequence, trimmed)",
            f"elapsed: {self.elapsed_seconds:.1f} s, {mb / seconds:.2f} MB/s, {self.instances / seconds:,.0f} instances/s",
        ]

    def merge(self, other: "Summary") -> None:
        """Adds another run's or worker's totals (the file lists and elapsed time stay this one's)."""
        for field in dataclasses.fields(self):
            if field.name not in ("input_files", "output_files", "read", "elapsed_seconds"):
                setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))
        self.read.add(other.read)

    def _share(self, count: int) -> str:
        return f"{100 * count / max(self.masked_positions, 1):.1f}%"


def check_vocabulary(config: PretrainingDataConfig) -> None:
    """Fails early, with the file named, on a missing vocabulary or one without the special tokens
    every instance needs (reads only the vocabulary: building a tokenizer is left to the workers)."""
    from bert_tf.text import tokenizers

    if bool(config.spm_model_file) == bool(config.vocab_file):
        raise UserError("give exactly one of --vocab_file (WordPiece) and --spm_model_file (SentencePiece)")
    if config.vocab_file:
        vocab = tokenizers.load_vocab(config.vocab_file)
    else:
        vocab = tokenizers.SentencePieceTokenizer(config.spm_model_file).vocab
    needed = ["[CLS]", "[SEP]", "[MASK]"] + (["[UNK]"] if config.vocab_file else [])
    tokenizers.check_special_tokens(vocab, needed, config.spm_model_file or config.vocab_file,
                                    "pretraining")


def make_tokenizer(config: PretrainingDataConfig):
    """The tokenizer the flags ask for (see `check_vocabulary`)."""
    from bert_tf.text import tokenizers

    if config.vocab_file:
        # `LineTokenizer` keeps its own word -> ids memo, so the tokenizer's own memo stays small.
        return tokenizers.FullTokenizer(config.vocab_file, do_lower_case=config.do_lower_case,
                                        cache_size=_TOKENIZER_CACHE)
    return tokenizers.create_tokenizer(spm_model_file=config.spm_model_file, do_lower_case=config.do_lower_case)


# --------------------------------------------------------------------------- one block
class BlockWorker:
    """Per-process state: the tokenizer and options; `run(block)` writes the block's parts.

    `write_block(block, parts)` is the whole per-block algorithm, to any part writers (the Beam
    pipeline passes in-memory ones)."""

    def __init__(self, config: PretrainingDataConfig, work_dir: str, num_outputs: int, progress=None):
        self.config = config
        self.options = config.instance
        self.work_dir = work_dir
        self.num_outputs = num_outputs
        self.progress = progress
        tokenizer = make_tokenizer(config)
        prepare_line = make_line_preparer(config.chinese_conversion, config.chinese_segmenter)
        self.lines = LineTokenizer(tokenizer, config.pre_segmented or bool(config.chinese_segmenter),
                                   config.instance.max_seq_length - 3, prepare_line)
        vocab = tokenizer.vocab
        self.special = SpecialIds(vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"], max(vocab.values()) + 1)
        if config.dynamic_masking:
            self.schema = features.unmasked_pretraining_schema(config.instance.max_seq_length)
        else:
            self.schema = features.pretraining_schema(config.instance.max_seq_length,
                                                      config.instance.max_predictions_per_seq)

    def run(self, block: Block) -> dict:
        counts = pretraining_output.finished_block(self.work_dir, block.index, self.num_outputs)
        if counts is not None:
            return counts  # finished by an earlier, interrupted run (marker and parts checked)
        parts = [pretraining_output.PartWriter(pretraining_output.part_path(self.work_dir, block.index, k))
                 for k in range(self.num_outputs)]
        counts = self.write_block(block, parts)
        filesystem.write_atomically(pretraining_output.done_path(self.work_dir, block.index), json.dumps(counts))
        return counts

    def write_block(self, block: Block, parts: list[pretraining_output.PartWriter]) -> dict:
        """Tokenizes, chunks, masks and encodes one block into `parts` (one per output file).

        Returns:
          The block's counts for `Summary.add_block`, with each part's piece boundaries.
        """
        seeds = np.random.SeedSequence([self.config.random_seed, block.index])
        py_rng = random.Random(int(seeds.generate_state(2, np.uint64)[0]))
        np_rng = np.random.Generator(np.random.PCG64(seeds.spawn(1)[0]))
        buffer, read_counts = self.lines.read_block(block)
        buffer = buffer.shuffled(py_rng)
        with _garbage_collection_paused():  # millions of small tuples, no cycles: skip the scans
            instances = create_instances(buffer, self.options, self.config.dupe_factor, py_rng, np_rng)
        instances = instances[np_rng.permutation(len(instances))]
        counts = {"documents": buffer.num_documents, "read": dataclasses.asdict(read_counts)}
        self._report(documents=buffer.num_documents, bytes=read_counts.bytes)
        try:
            for begin in range(0, len(instances), _BATCH):
                batch_counts = self._write_batch(buffer, instances[begin:begin + _BATCH], begin, parts, np_rng)
                for key, value in batch_counts.items():
                    counts[key] = counts.get(key, 0) + value
                self._report(instances=batch_counts["instances"])
        except BaseException:
            for part in parts:
                part.discard()
            raise
        counts["pieces"] = [part.finish() for part in parts]
        counts["parts"] = [part.summary.as_dict() for part in parts]
        counts["block"] = block.index
        return counts

    def _write_batch(self, buffer: DocumentBuffer, instances: np.ndarray, first_index: int,
                     parts: list[pretraining_output.PartWriter], rng: np.random.Generator) -> dict:
        seq = self.options.max_seq_length
        assembled = assemble_features(buffer, instances, seq, self.special)
        if self.config.dynamic_masking:
            values = unmasked_features(assembled, self.options, self.special)
            choice = np.zeros(0, np.int8)
        else:
            masked = create_masked_lm_predictions(assembled["input_ids"], assembled["input_mask"],
                                                  assembled["word_starts"], self.options, self.special, rng)
            choice = masked.pop("masked_choice")
            values = dict(masked, input_mask=assembled["input_mask"], segment_ids=assembled["segment_ids"],
                          next_sentence_labels=assembled["next_sentence_labels"])
        framed, offsets = tfrecord.frame_dense(*self.schema.encode_dense(values))
        # the original's round robin: record i goes to output file i % num_outputs
        sizes = np.diff(offsets)
        if len(parts) == 1:
            parts[0].write(framed, sizes)
        else:
            target = (first_index + np.arange(len(instances))) % len(parts)
            for k, part in enumerate(parts):
                part.write(framed[np.repeat(target == k, sizes)], sizes[target == k])
        lengths = assembled["input_mask"].sum(axis=1)
        return {"instances": len(instances), "tokens": int(lengths.sum()),
                "short_instances": int((lengths < seq / 2).sum()),
                "random_next": int(assembled["next_sentence_labels"].sum()),
                "masked_positions": int((choice >= 0).sum()), "masked_as_mask": int((choice == 0).sum()),
                "masked_kept": int((choice == 1).sum()), "masked_random": int((choice == 2).sum())}

    def _report(self, **amounts) -> None:
        if self.progress is not None:
            for key, value in amounts.items():
                with self.progress[key].get_lock():
                    self.progress[key].value += value


@contextlib.contextmanager
def _garbage_collection_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# --------------------------------------------------------------------------- the run
_WORKER: BlockWorker | None = None


def _init_worker(config: PretrainingDataConfig, work_dir: str, num_outputs: int, progress) -> None:
    global _WORKER
    _WORKER = BlockWorker(config, work_dir, num_outputs, progress)


def _run_block(block: Block) -> dict:
    return _WORKER.run(block)


def plan_run(config: PretrainingDataConfig) -> tuple[list[str], list[str], list[Block]]:
    """Checks the flags, inputs and vocabulary, before any worker starts (every runner calls it).

    Returns:
      (input files, output files, blocks). Raises ValueError/OSError naming the file or flag.
    """
    config.instance.validate()
    config.task_text.validate()
    if config.dupe_factor < 1 or config.num_workers < 1:
        raise UserError(f"--dupe_factor and --num_workers must be positive, got {config.dupe_factor} "
                         f"and {config.num_workers}")
    inputs = expand_input_patterns(config.input_file)
    outputs = pretraining_output.expand_output_files(config.output_file)
    check_paths(config, outputs)
    check_vocabulary(config)
    make_line_preparer(config.chinese_conversion, config.chinese_segmenter)  # a missing extra too
    if config.task_text.input_format == "text":
        return inputs, outputs, plan_blocks(inputs, config.document_buffer_size)
    return inputs, outputs, plan_task_blocks(inputs, config.task_text, config.document_buffer_size)


def check_paths(config: PretrainingDataConfig, outputs: Sequence[str]) -> None:
    """Output and vocabulary paths have a file system that handles them (one line naming the flag)."""
    for path in outputs:
        filesystem.check_path(path, "--output_file")
    if config.vocab_file:
        filesystem.check_path(config.vocab_file, "--vocab_file")
    if config.spm_model_file and filesystem.scheme(config.spm_model_file):
        raise UserError(f"--spm_model_file: {config.spm_model_file}: SentencePiece models are read from "
                        "local paths only; copy the model to this machine and give that path")


@dataclasses.dataclass(frozen=True)
class PreparedRun:
    """A run whose flags, inputs and vocabulary are checked and whose output directories exist
    (`prepare_run`); `write_prepared` writes its records."""
    config: PretrainingDataConfig
    inputs: list[str]
    outputs: list[str]
    blocks: list[Block]
    work_dir: str
    started: float  # time.time() before the checks: the summary's elapsed time counts them

    @property
    def first_output(self) -> str:
        """The first output's absolute path, whose run lock create_pretraining_data.py holds
        around `write_prepared` (`bert_tf.cli.run_lock.output_file_lock`)."""
        return filesystem.absolute(self.outputs[0])


def prepare_run(config: PretrainingDataConfig) -> PreparedRun:
    """The checks (`plan_run`), then the output directories: all that comes before the run lock,
    so that bad input stops the run before a lock file is made."""
    started = time.time()
    inputs, outputs, blocks = plan_run(config)
    pretraining_output.make_output_directories(outputs)
    return PreparedRun(config, inputs, outputs, blocks, _work_dir(config, inputs, outputs), started)


def write_prepared(run: PreparedRun) -> Summary:
    """Writes the records of a prepared run, resuming the blocks an interrupted run finished.
    The caller holds the first output's run lock (no other run may write the work directory)."""
    pretraining_output.remove_leftovers(run.outputs, run.work_dir)
    filesystem.makedirs(run.work_dir)
    # A full disk names the output asked for; the finished parts stay for the rerun to resume.
    with full_disk.named_when_full(run.config.output_file, lambda: None):
        summary = _run_blocks(run.config, run.inputs, run.outputs, run.blocks, run.work_dir,
                              run.started)
    summary.elapsed_seconds = time.time() - run.started
    return summary


def create_pretraining_data(config: PretrainingDataConfig) -> Summary:
    """Converts text files into pretraining TFRecords (see the module docstring): `prepare_run`,
    then `write_prepared`. It takes no run lock: create_pretraining_data.py takes it between the
    two.

    Returns:
      The run's `Summary`. Raises ValueError/OSError naming the file or flag on bad input.
    """
    return write_prepared(prepare_run(config))


def _run_blocks(config: PretrainingDataConfig, inputs: Sequence[str], outputs: Sequence[str],
                blocks: Sequence[Block], work_dir: str, started: float) -> Summary:
    """Runs (or finds finished) every block, merges the parts and removes the work directory."""
    summary = Summary(input_files=len(inputs), output_files=outputs, dynamic_masking=config.dynamic_masking)
    pieces: dict[int, list[list[int]]] = {}
    context = _worker_context()
    progress = {key: context.Value("q", 0) for key in ("bytes", "documents", "instances")}
    total_bytes = sum(block.num_bytes for block in blocks)
    reporter = _ProgressReporter(progress, total_bytes, started, enabled=config.progress)
    try:
        num_workers = min(config.num_workers, len(blocks))
        if num_workers <= 1:
            reporter.start()
            worker = BlockWorker(config, work_dir, len(outputs), progress)
            for block in blocks:
                counts = worker.run(block)
                summary.add_block(counts)
                pieces[counts["block"]] = counts["pieces"]
        else:
            with context.Pool(num_workers, _init_worker, (config, work_dir, len(outputs), progress)) as pool:
                reporter.start()  # only now: a forked worker must not inherit a running thread
                for counts in pool.imap_unordered(_run_block, blocks):
                    summary.add_block(counts)
                    pieces[counts["block"]] = counts["pieces"]
        if not summary.instances:
            pretraining_output.remove_work_dir(work_dir)
            raise EmptyInputError(no_instances_message(inputs, summary, config.task_text.input_format))
        pretraining_output.merge_parts(work_dir, pieces, outputs, config.random_seed)
    finally:
        reporter.stop()
    pretraining_output.remove_work_dir(work_dir)
    return summary


def _worker_context() -> multiprocessing.context.BaseContext:
    """Fork when it is safe: on Linux, in a process that runs one thread and has not loaded
    TensorFlow (as `create_pretraining_data.py`'s); a forked worker starts in milliseconds, where a
    spawned one spends a large part of a small run importing numpy and bert_tf again. Else spawn."""
    if (sys.platform.startswith("linux") and threading.active_count() == 1
            and "tensorflow" not in sys.modules):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def no_instances_message(inputs: Sequence[str], summary: Summary, input_format: str = "text") -> str:
    """Why a run made no instance, naming the input (no output file is written then)."""
    what = inputs[0] if len(inputs) == 1 else f"{len(inputs)} files ({inputs[0]}, ...)"
    expected = {"text": "text with one sentence per line and a blank line between documents",
                "tsv": "rows whose --text_columns hold text", "csv": "rows whose --text_columns hold text",
                "squad": "SQuAD articles with paragraph contexts",
                "conll": "one word per line, a blank line between sentences"}[input_format]
    return (f"--input_file: {what}: no documents to make pretraining instances from "
            f"({summary.documents} documents in {summary.read.lines} lines); expected {expected} "
            f"(--input_format={input_format})")


def _work_dir(config: PretrainingDataConfig, inputs: Sequence[str], outputs: Sequence[str]) -> str:
    """A directory named after everything that shapes the output bytes (not the worker count)."""
    shaping = dataclasses.asdict(dataclasses.replace(config, num_workers=1, progress=True))
    shaping["inputs"] = [(filesystem.absolute(p), *filesystem.stat(p)) for p in inputs]
    shaping["vocabulary"] = [(p, *filesystem.stat(p)) for p in (config.vocab_file, config.spm_model_file) if p]
    shaping["outputs"] = list(outputs)
    shaping["version"] = FORMAT_VERSION
    digest = hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]
    first = filesystem.absolute(outputs[0])
    return filesystem.join(filesystem.dirname(first), f".{filesystem.basename(first)}.parts-{digest}")


class _ProgressReporter:
    """Prints documents, instances and MB/s to stderr: in place on a terminal, else every 30 s."""

    def __init__(self, counters: dict, total_bytes: int, started: float, enabled: bool):
        self.counters, self.total_bytes, self.started = counters, total_bytes, started
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        if self.enabled:
            self._thread.start()

    def stop(self) -> None:
        if self.enabled and self._thread.ident is not None:
            self._stop.set()
            self._thread.join()
            self._print(final=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.5 if self.tty else 30.0):
            self._print()

    def _print(self, final: bool = False) -> None:
        values = {k: v.value for k, v in self.counters.items()}
        seconds = max(time.time() - self.started, 1e-9)
        line = (f"[create_pretraining_data] {values['bytes'] / 1e6:,.1f}/{self.total_bytes / 1e6:,.1f} MB, "
                f"{values['documents']:,} documents, {values['instances']:,} instances, "
                f"{values['bytes'] / 1e6 / seconds:.2f} MB/s, {seconds:.0f} s")
        end = "\n" if final or not self.tty else ""
        sys.stderr.write(("\r" if self.tty else "") + line + end)
        sys.stderr.flush()
