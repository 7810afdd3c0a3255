"""Seconds to write each raw-text export (trace the signatures, write the SavedModel), per kind,
for git revisions side by side in one run.

    python benchmarks/export_time.py --revisions=main,. --rounds=3

Each revision ("." is the working tree; others are `git archive`d into a temporary directory)
runs in its own child process per round, the revisions alternating; the child builds tiny
models (random weights: tracing and writing cost the same for every weight value), times
`first`, the process's first export (the first kind; it also pays one-time costs: the
tokenizer's character classes, tensorflow-text's import), then every kind once more, warm.
Prints the machine, then one JSON line per revision and kind: the median seconds over rounds,
`graph_bytes` (the size of saved_model.pb: the stored graphs) and the ratio of the seconds to
the first revision's (below 1: faster).

Kinds: classifier (single text, --truncation=head), classifier_head_tail, classifier_chunks
(--long_text=chunks), classifier_pair, ner (CoNLL words), ner_char, squad, features (both
signatures).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KINDS = ("classifier", "classifier_head_tail", "classifier_chunks", "classifier_pair", "ner",
         "ner_char", "squad", "features")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".",
         "##s", "who", "?"]


def _exporters(directory: str) -> dict:
    """kind -> a function writing that export under `directory` (tiny models, random weights)."""
    from bert_tf.model import models
    from bert_tf.model.config import BertConfig
    from bert_tf.serving.saved_model import in_graph_tokenizer
    from bert_tf.tasks.classifier.export import export_classifier
    from bert_tf.tasks.features.export import export_features
    from bert_tf.tasks.ner.export import export_tagger
    from bert_tf.tasks.squad.export import export_squad
    from bert_tf.text.long_text import LongText

    vocab_file = os.path.join(directory, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")

    def tokenizer():  # a new one per export, as each script run builds its own
        return in_graph_tokenizer(vocab_file, None, do_lower_case=True)

    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)

    def built(model):
        model(model.dummy_inputs(), training=False)
        return model

    classifier = built(models.ClassifierModel(config, num_labels=2))
    tagger = built(models.TokenClassifierModel(config, num_labels=3))
    span = built(models.SpanModel(config))

    labels = ["O", "B", "I"]

    def path(kind: str) -> str:
        return os.path.join(directory, kind)

    def classifier_export(kind: str, pair: bool = False, long_text=LongText()):
        return lambda: export_classifier(classifier, path(kind), ["0", "1"], False, tokenizer(), 32,
                                         pair, long_text=long_text)

    return {
        "classifier": classifier_export("classifier"),
        "classifier_head_tail": classifier_export(
            "classifier_head_tail", long_text=LongText(truncation="head+tail", head_tokens=8)),
        "classifier_chunks": classifier_export("classifier_chunks",
                                               long_text=LongText(mode="chunks")),
        "classifier_pair": classifier_export("classifier_pair", pair=True),
        "ner": lambda: export_tagger(tagger, path("ner"), tokenizer(), labels, 32, 8, False),
        "ner_char": lambda: export_tagger(tagger, path("ner_char"), tokenizer(), labels, 32, 8,
                                          True),
        "squad": lambda: export_squad(span, path("squad"), tokenizer(), 32, 8, 8, 5, 10, True,
                                      None),
        "features": lambda: export_features(classifier.encoder, path("features"), tokenizer(),
                                            (-1,), 32),
    }


def child(kinds: list[str]) -> None:
    """Times each kind's export in this process; prints one JSON object."""
    with tempfile.TemporaryDirectory() as directory:
        exporters = _exporters(directory)
        seconds = {}
        start = time.perf_counter()
        exporters[kinds[0]]()
        seconds["first"] = time.perf_counter() - start
        graph_bytes = {}
        for kind in kinds:
            start = time.perf_counter()
            export_dir = exporters[kind]()
            seconds[kind] = time.perf_counter() - start
            graph_bytes[kind] = os.path.getsize(os.path.join(export_dir, "saved_model.pb"))
    print(json.dumps({"seconds": seconds, "graph_bytes": graph_bytes}))


def _tree(revision: str, scratch: str) -> str:
    """A directory holding `revision`'s bert_tf ("." : this working tree)."""
    if revision == ".":
        return ROOT
    target = os.path.join(scratch, revision.replace("/", "_"))
    os.makedirs(target)
    archive = subprocess.run(["git", "-C", ROOT, "archive", revision, "bert_tf"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", target], input=archive, check=True)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--revisions", default=".", help="comma-separated git revisions "
                        "(\".\": the working tree); ratios are over the first")
    parser.add_argument("--rounds", type=int, default=3, help="child processes per revision")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"some of {','.join(KINDS)}")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; use some of {', '.join(KINDS)}")
    if args.child:
        child(kinds)
        return

    sys.path.insert(0, HERE)
    import tensorflow as tf
    from machine import machine_info
    print(json.dumps(machine_info(tf)), flush=True)
    revisions = args.revisions.split(",")
    runs = {revision: [] for revision in revisions}
    with tempfile.TemporaryDirectory() as scratch:
        trees = {revision: _tree(revision, scratch) for revision in revisions}
        for _ in range(args.rounds):
            for revision in revisions:
                env = {**os.environ, "PYTHONPATH": trees[revision], "TF_CPP_MIN_LOG_LEVEL": "2"}
                out = subprocess.run([sys.executable, __file__, "--child", f"--kinds={args.kinds}"],
                                     env=env, check=True, capture_output=True, text=True).stdout
                runs[revision].append(json.loads(out.strip().splitlines()[-1]))
    medians = {revision: {kind: statistics.median(run["seconds"][kind] for run in runs[revision])
                          for kind in ["first", *kinds]} for revision in revisions}
    for revision in revisions:
        for kind, seconds in medians[revision].items():
            row = {"revision": revision, "kind": kind, "seconds": round(seconds, 3)}
            if kind != "first":
                row["graph_bytes"] = runs[revision][0]["graph_bytes"][kind]
            if revision != revisions[0]:
                row["vs_" + revisions[0]] = round(seconds / medians[revisions[0]][kind], 3)
            print(json.dumps(row))


if __name__ == "__main__":
    main()
