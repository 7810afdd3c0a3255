"""Users' DataProcessor classes written for the original, run by run_classifier.py --processor.

The processor below is in the original's style (an MRPC reader: `_read_tsv`, header skipped,
`tokenization.convert_to_unicode`, `InputExample(guid=..., text_a=..., text_b=..., label=...)`,
a dummy test label); only its import lines name bert_tf. The script trains, evaluates, predicts
and exports with it; its records equal those of the built-in MRPC task on the same files.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.tasks.classifier import compat, export as serving
from bert_tf.tasks.classifier import processors as classification, features as classifier_features
from bert_tf.tokenization import FullTokenizer
from conftest import TESTDATA
from support.tiny_models import REPO, ScriptRun, read_results, write_tiny_model

MRPC = os.path.join(TESTDATA, "glue", "MRPC")
VOCAB = os.path.join(TESTDATA, "glue", "vocab.txt")

PROCESSOR = '''
import os

{imports}


class PairProcessor(DataProcessor):
  """Paraphrase pairs: quality, id, id, sentence, sentence."""

  def get_train_examples(self, data_dir):
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "train.tsv")), "train")

  def get_dev_examples(self, data_dir):
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "dev.tsv")), "dev")

  def get_test_examples(self, data_dir):
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "test.tsv")), "test")

  def get_labels(self):
    return ["0", "1"]

  def _create_examples(self, lines, set_type):
    examples = []
    for (i, line) in enumerate(lines):
      if i == 0:
        continue
      guid = "%s-%s" % (set_type, i)
      text_a = tokenization.convert_to_unicode(line[3])
      text_b = tokenization.convert_to_unicode(line[4])
      if set_type == "test":
        label = "0"
      else:
        label = tokenization.convert_to_unicode(line[0])
      examples.append(
          InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label))
    return examples


class LabelsOnly(DataProcessor):

  def get_labels(self):
    return ["0", "1"]
'''
SCRIPT_IMPORTS = "from bert_tf import tokenization\nfrom run_classifier import DataProcessor, InputExample"
LIBRARY_IMPORTS = ("from bert_tf import tokenization\n"
                   "from bert_tf.tasks.classifier.compat import DataProcessor, InputExample")


def _write_processor(directory, name, imports):
    path = os.path.join(os.fspath(directory), name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(PROCESSOR.format(imports=imports))
    return path


@pytest.fixture(scope="module")
def script_runs(tmp_path_factory, script_runner):
    """run_classifier.py with the processor file (train, eval, predict, export), and with a
    class that lacks the methods; started first, checked by the last tests."""
    directory = tmp_path_factory.mktemp("processor")
    path = _write_processor(directory, "pair_processor.py", SCRIPT_IMPORTS)
    with open(VOCAB, encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    _, config_file = write_tiny_model(directory, [], vocab_size=vocab_size)  # VOCAB's size
    common = [f"--data_dir={MRPC}", f"--vocab_file={VOCAB}", f"--bert_config_file={config_file}",
              "--max_seq_length=13", "--train_batch_size=2", "--eval_batch_size=2"]
    run = ScriptRun(script_runner, "run_classifier.py", [
        f"--processor={path}:PairProcessor", *common, "--do_train", "--do_eval", "--do_predict",
        "--num_train_epochs=1", f"--output_dir={directory / 'run'}",
        f"--export_dir={directory / 'export'}"])
    bad = script_runner.start([([os.path.join(REPO, "run_classifier.py"),
                                 f"--processor={path}:LabelsOnly", *common, "--do_train",
                                 f"--output_dir={directory / 'bad'}"], REPO)])
    yield run, bad, directory
    run.stop()
    bad.kill()


def test_processor_file_and_module_load(tmp_path, monkeypatch):
    path = _write_processor(tmp_path, "my_processors.py", LIBRARY_IMPORTS)
    from_file = compat.load_processor(f"{path}:PairProcessor", ("train", "test"))
    monkeypatch.syspath_prepend(str(tmp_path))
    from_module = compat.load_processor("my_processors:PairProcessor", ("dev",))
    assert from_file.get_labels() == from_module.get_labels() == ["0", "1"]
    task, read_split = compat.processor_task(from_module, "pairs")
    examples = read_split(MRPC, "train")
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in examples] == [
        ("train-1", "The cat sat.", "A cat was sitting.", "1"),
        ("train-2", "The dog ran.", 'It rained "all" day.', "0")]
    assert task.labels == ("0", "1") and read_split(MRPC, "test")[0].label == "0"


def test_processor_records_equal_the_builtin_task_records(tmp_path):
    """The same files through the processor and through --task_name=MRPC: the same bytes."""
    path = _write_processor(tmp_path, "my_processors.py", LIBRARY_IMPORTS)
    processor = compat.load_processor(f"{path}:PairProcessor", ("train",))
    task, read_split = compat.processor_task(processor, "pairs")
    tokenizer = FullTokenizer(VOCAB)
    for split in ("train", "dev", "test"):
        ours = classifier_features.FeatureCache(task, MRPC, str(tmp_path / "p"), 13, tokenizer,
                                                [VOCAB], True, read_split).records(split)
        builtin = classifier_features.FeatureCache(classification.get_task("mrpc"), MRPC,
                                                   str(tmp_path / "b"), 13, tokenizer, [VOCAB],
                                                   True).records(split)
        assert ours.num_examples == builtin.num_examples
        with open(ours.path, "rb") as a, open(builtin.path, "rb") as b:
            mine, theirs = a.read(), b.read()
        # Test labels: the processor's dummy "0" and the built-in's unlabeled 0 are one id.
        assert mine == theirs


@pytest.mark.parametrize("spec, message", [
    ("no_colon_here", "expected module:Class"),
    ("missing/file.py:X", "missing/file.py not found"),
    ("no_such_module_xyz:X", "cannot import no_such_module_xyz"),
    ("os:NoClass", "has no class NoClass"),
])
def test_bad_processor_specs(spec, message):
    with pytest.raises(UserError, match=message):
        compat.load_processor(spec, ("train",))


def test_bad_examples_name_the_example(tmp_path):
    class WrongLabels(compat.DataProcessor):
        def get_labels(self):
            return ["a", "b"]

        def get_train_examples(self, data_dir):
            return [compat.InputExample("x-1", "text", label="c")]

    task, read_split = compat.processor_task(WrongLabels(), "wrong")
    with pytest.raises(UserError, match=r"example 'x-1' has label 'c', not one of get_labels"):
        read_split(str(tmp_path), "train")
    with pytest.raises(UserError, match="file not found"):
        compat.DataProcessor._read_tsv(str(tmp_path / "nothing.tsv"))


def test_missing_methods_are_one_error_line(script_runs):
    _, bad, _ = script_runs
    [done] = bad.wait(timeout=600)
    stderr = done.stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 1 and len(errors) == 1 and "Traceback" not in stderr, stderr
    assert errors[0].startswith("error: --processor=") and "get_train_examples" in errors[0]


def test_processor_trains_evaluates_predicts_and_exports(script_runs):
    run, _, directory = script_runs
    run.wait()
    results = read_results(directory / "run" / "eval_results.txt")
    assert sorted(results) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
    assert results["global_step"] == 1 and results["eval_accuracy"] in (0.0, 1.0)  # 1 dev example
    assert (directory / "run" / "label_list.txt").read_text().split() == ["0", "1"]
    rows = [line.split("\t") for line in (directory / "run" / "test_results.tsv").read_text().splitlines()]
    assert len(rows) == 1 and len(rows[0]) == 2 and sum(map(float, rows[0])) == pytest.approx(1.0, abs=1e-5)
    # The export's ids-in signature gives the probabilities that --do_predict wrote (loading it
    # needs the in-graph tokenizer's ops registered, as every export does).
    import tensorflow_text  # noqa: F401
    exported = tf.saved_model.load(str(directory / "export"))
    schema = classifier_features.record_schemas.classifier_schema(13, regression=False)
    record = next(iter(tf.data.TFRecordDataset(str(directory / "run" / "predict.tf_record"))))
    features = schema.decode(record.numpy())
    inputs = {k: tf.constant(features[k][None], tf.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    probabilities = exported.signatures[serving.IDS_SIGNATURE_KEY](**inputs)["probabilities"].numpy()
    np.testing.assert_allclose(probabilities[0], np.array(rows[0], np.float32), atol=1e-5)
