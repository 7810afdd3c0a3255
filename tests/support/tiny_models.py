"""For the end-to-end fine-tuning tests (classifier, SQuAD, NER): tiny BERT models over a
word-level vocabulary, scripts run in the background, and the results files."""

from __future__ import annotations

import os
from typing import Iterable

from bert_tf.model.config import BertConfig
from bert_tf.text.tokenizers import BasicTokenizer
from support.pretraining_records import TINY_CONFIG
from support.script_runs import ScriptRunner

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # tests/support/..
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def words_of(texts: Iterable[str]) -> set[str]:
    """The lower-cased words and punctuation of `texts`, as BasicTokenizer splits them."""
    basic = BasicTokenizer(do_lower_case=True)
    return {word for text in texts for word in basic.tokenize(text)}


def words_of_files(paths: Iterable[str]) -> set[str]:
    texts = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    return words_of(texts)


def write_tiny_model(directory: str | os.PathLike, words: Iterable[str],
                     **config_changes) -> tuple[str, str]:
    """Writes vocab.txt (the special tokens, then `words` sorted: every word is one WordPiece)
    and bert_config.json (the tiny sizes of `TINY_CONFIG` over that vocabulary).

    Returns:
        (vocab_file, bert_config_file).
    """
    vocab = list(SPECIAL_TOKENS) + sorted(set(words))
    vocab_file = os.path.join(os.fspath(directory), "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    config_file = os.path.join(os.fspath(directory), "bert_config.json")
    BertConfig(**{**TINY_CONFIG, "vocab_size": len(vocab), **config_changes}).to_json_file(
        config_file)
    return vocab_file, config_file


def train_tiny_sentencepiece(prefix: str, num_lines: int = 2000, vocab_size: int = 300,
                             **trainer_options) -> str:
    """A tiny unigram SentencePiece model trained in-process on generated lines, with BERT's
    special names (as build_vocab.py trains them; `trainer_options` override spm_train's
    options, e.g. ALBERT's names). Returns the .model path."""
    import sentencepiece

    from bert_tf.text import testing_text

    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(testing_text.varied_lines(num_lines, seed=7, exotic_rate=0.0)),
        **{"model_prefix": prefix, "vocab_size": vocab_size, "model_type": "unigram",
           "pad_id": 0, "unk_id": 1, "bos_id": -1, "eos_id": -1, "pad_piece": "[PAD]",
           "unk_piece": "[UNK]", "control_symbols": "[CLS],[SEP],[MASK]", "minloglevel": 2,
           **trainer_options})
    return prefix + ".model"


def write_random_encoder(directory: str | os.PathLike, vocab: list[str], **config) -> None:
    """vocab.txt, bert_config.json and a Google-layout bert_model.ckpt of a BertEncoder whose
    weights are drawn N(0, 0.3) (larger than the initialisation, so layers differ visibly)."""
    import numpy as np

    from bert_tf.checkpoints import name_map as checkpoints
    from bert_tf.model.encoder import BertEncoder

    directory = os.fspath(directory)
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in vocab))
    encoder = BertEncoder(BertConfig(vocab_size=len(vocab), **config))
    rng = np.random.default_rng(0)
    for v in encoder.weights:
        v.assign(rng.normal(0, 0.3, v.shape).astype(np.float32))
    checkpoints.export_google_checkpoint(encoder, os.path.join(directory, "bert_model.ckpt"))


def write_initial_checkpoint(task, directory: str | os.PathLike) -> str:
    """`task`'s model (a `training.Task`) as the loop initialises it (seeded as the loop seeds
    it), heads included, written as the one bert_tf checkpoint in `directory`: an
    --init_checkpoint that a run predicts and exports from without a training step. Returns
    its prefix."""
    import keras

    from bert_tf.training import loop as training

    keras.utils.set_random_seed(training.RunConfig.seed)
    return training.write_model_checkpoint(
        task.build_model(), os.path.join(os.fspath(directory), "model.ckpt"), 0)


def read_results(path: str | os.PathLike) -> dict[str, float]:
    """The `key = value` lines of an eval_results.txt / test_results.txt."""
    with open(path, encoding="utf-8") as f:
        pairs = [line.rstrip("\n").split(" = ") for line in f]
    return {key: float(value) for key, value in pairs}


class ScriptRun:
    """`python <script> <flags>` started from the tests' fork server (script_runs.py), its
    stderr into its stdout.

    A test module starts its script in a module fixture, runs its in-process tests while the
    script runs on the other core, and checks the script's outputs last (`wait`).
    """

    def __init__(self, runner: ScriptRunner, script: str, flags: Iterable[str]):
        self.batch = runner.start([([os.path.join(REPO, script), *flags], REPO)],
                                  stderr_to_stdout=True)
        self.output: str | None = None

    def wait(self, timeout: float = 600) -> str:
        """Waits for the script, asserts it succeeded, and returns its output (stdout and
        stderr together)."""
        if self.output is None:
            [run] = self.batch.wait(timeout)
            assert run.returncode == 0, run.stdout[-3000:]
            self.output = run.stdout
        return self.output

    def stop(self) -> None:
        """Kills the script if it still runs (a test failed before waiting for it)."""
        if self.output is None:
            self.batch.kill()


def demo_model_flags(data_dir: str, file_names: Iterable[str], directory: str | os.PathLike,
                     **config_changes) -> list[str]:
    """Writes a tiny model over the words of `data_dir`'s files (`config_changes` on
    TINY_CONFIG, e.g. num_hidden_layers=1) and returns --data_dir, --vocab_file,
    --bert_config_file and --output_dir=<directory>/run for a script on that data."""
    vocab_file, config_file = write_tiny_model(directory, words_of_files(
        os.path.join(data_dir, name) for name in file_names), **config_changes)
    return [f"--data_dir={data_dir}", f"--vocab_file={vocab_file}",
            f"--bert_config_file={config_file}",
            f"--output_dir={os.path.join(os.fspath(directory), 'run')}"]
