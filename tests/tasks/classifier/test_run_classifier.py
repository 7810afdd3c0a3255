"""run_classifier end to end on a tiny model: the bundled demo set learns well above chance
through the script (started first, checked last, so that the in-process tests run meanwhile),
STS-B regression writes its files in the right formats, and the pieces in between."""

import dataclasses
import importlib.util
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.records import features as record_schemas
from bert_tf.tasks.classifier import metrics as glue_metrics
from bert_tf.tasks.classifier import processors as classification, features as classifier_features
from bert_tf.tasks.classifier import task as classifier_task, export as serving
from bert_tf.text.tokenizers import FullTokenizer
from bert_tf.tasks import finetuning
from bert_tf.training import loop as training
from conftest import TESTDATA
from support.tiny_models import REPO, ScriptRun, demo_model_flags, read_results

DEMO = os.path.join(REPO, "demo", "data", "classification")
GLUE = os.path.join(TESTDATA, "glue")


def _load_generator():
    spec = importlib.util.spec_from_file_location("demo_generate", os.path.join(DEMO, "generate.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", autouse=True)
def demo_run(tmp_path_factory, script_runner):
    """run_classifier.py on the bundled demo set, started before this module's first test: the
    in-process tests run meanwhile, `test_demo_task_learns_and_exports` (last) checks it."""
    directory = tmp_path_factory.mktemp("demo")
    export = directory / "export"
    # 800 examples / 16 × 3 epochs = 150 steps; 200 dev and test examples pad to batches of 16/32.
    flags = ["--task_name=SST-2", "--do_train", "--do_eval", "--do_predict",
             "--max_seq_length=16", "--train_batch_size=16", "--eval_batch_size=16",
             "--predict_batch_size=32", "--learning_rate=5e-4", "--num_train_epochs=3",
             "--log_every_n_steps=50", f"--export_dir={export}"]
    # One encoder layer: the cue words need no depth (eval accuracy 1.0 with one layer).
    run = ScriptRun(script_runner, "run_classifier.py", [*demo_model_flags(
        DEMO, ("train.tsv", "dev.tsv", "test.tsv"), directory, num_hidden_layers=1), *flags])
    out = directory / "run"
    yield run, out, export
    run.stop()


def test_stsb_regression_end_to_end(tiny_config, tmp_path, monkeypatch):
    # After 3 steps the predictions are nearly constant, so Pearson and Spearman of two runs that
    # round differently (eval on batches cut to their longest row, the export on length 13, or
    # another CPU's kernels) can differ far beyond float32 rounding. So the predictions are
    # compared at a float32 tolerance, and each metric is checked against the eval's own
    # predictions, which it must reproduce to the last digit.
    eval_rows = []
    real_eval_metrics = classifier_task.eval_metrics

    def spy_eval_metrics(task, loop_results, rows, *args):
        eval_rows.extend(rows)
        return real_eval_metrics(task, loop_results, rows, *args)

    monkeypatch.setattr(classifier_task, "eval_metrics", spy_eval_metrics)
    config_file = str(tmp_path / "bert_config.json")
    # One encoder layer: the checks are on the regression head's files, metrics and export.
    dataclasses.replace(tiny_config, num_hidden_layers=1).to_json_file(config_file)
    options = classifier_task.ClassifierOptions(
        task_name="sts-b", data_dir=os.path.join(GLUE, "STS-B"), bert_config_file=config_file,
        vocab_file=os.path.join(GLUE, "vocab.txt"), max_seq_length=13, do_train=True,
        do_eval=True, do_predict=True, num_train_epochs=1.0,
        export_dir=str(tmp_path / "export"))
    run_config = training.RunConfig(output_dir=str(tmp_path / "run"), train_batch_size=2,
                                    eval_batch_size=3, learning_rate=1e-3)
    out = classifier_task.run_classifier(options, run_config)
    results = read_results(tmp_path / "run" / "eval_results.txt")
    assert sorted(results) == ["eval_loss", "eval_pearson", "eval_spearman", "global_step", "loss"]
    assert results["global_step"] == 3  # int(6 examples / 2 × 1 epoch)
    assert out["num_predictions"] == 1
    lines = (tmp_path / "run" / "test_results.tsv").read_text().splitlines()
    assert len(lines) == 1 and "\t" not in lines[0]
    float(lines[0])
    assert (tmp_path / "run" / "label_list.txt").read_text() == ""

    # Recompute the eval figures from the exported model on the 4 real dev records: the 2
    # padding rows of the second batch of 3 must count in none of them.
    schema = record_schemas.classifier_schema(13, regression=True)
    dev = [schema.decode(r.numpy()) for r in tf.data.TFRecordDataset(str(tmp_path / "run" / "eval.tf_record"))]
    features = {k: tf.constant(np.stack([r[k] for r in dev]), tf.int32)
                for k in ("input_ids", "input_mask", "segment_ids")}
    labels = np.array([r["label_ids"][0] for r in dev])
    np.testing.assert_allclose(labels, [5.0, 0.5, 2.0, 4.2])
    loaded = tf.saved_model.load(options.export_dir)
    predictions = loaded.signatures[serving.IDS_SIGNATURE_KEY](**features)["predictions"].numpy()
    assert predictions.shape == (4,)
    real = [r for r in eval_rows if r["is_real_example"] > 0]
    np.testing.assert_array_equal([r["label_ids"] for r in real], labels)
    eval_predictions = np.array([r["predictions"] for r in real], np.float64)
    np.testing.assert_allclose(eval_predictions, predictions, rtol=1e-5, atol=1e-5)
    assert results["eval_loss"] == pytest.approx(np.mean((predictions - labels) ** 2), rel=1e-5)
    assert results["eval_pearson"] == pytest.approx(
        np.float32(glue_metrics.pearson(eval_predictions, labels)), rel=1e-6)
    assert results["eval_spearman"] == pytest.approx(
        np.float32(glue_metrics.spearman(eval_predictions, labels)), rel=1e-6)


def _cache(tmp_path, max_seq_length=12, task_name="sst-2"):
    task = classification.get_task(task_name)
    vocab = os.path.join(GLUE, "vocab.txt")
    return classifier_features.FeatureCache(
        task, os.path.join(GLUE, "SST-2"), str(tmp_path), max_seq_length,
        FullTokenizer(vocab, do_lower_case=True), [vocab], True)


def test_feature_cache_reuses_and_rebuilds(tmp_path):
    split = _cache(tmp_path).records("train")
    assert split == (str(tmp_path / "train.tf_record"), 2, 2)  # records, texts
    first = os.stat(split.path).st_mtime_ns
    os.utime(split.path, ns=(first - 10**9, first - 10**9))  # any rewrite changes this
    assert _cache(tmp_path).records("train") == split
    assert os.stat(split.path).st_mtime_ns == first - 10**9
    _cache(tmp_path, max_seq_length=14).records("train")
    assert os.stat(split.path).st_mtime_ns != first - 10**9
    assert sorted(os.listdir(tmp_path)) == ["train.tf_record", "train.tf_record.json"]
    record = record_schemas.classifier_schema(14).decode(
        next(iter(tf.data.TFRecordDataset(split.path))).numpy())
    np.testing.assert_array_equal(record["input_ids"][:5], [2, 11, 19, 21, 3])  # [CLS] a good film [SEP]
    assert record["label_ids"][0] == 1 and record["is_real_example"][0] == 1


def test_eval_input_pads_to_full_global_batches(tmp_path):
    cache = _cache(tmp_path)
    input_fn = cache.input_fn(cache.records("train"), is_training=False)
    # 2 examples, 2 replicas × 3 per replica: one pipeline sees 1 real row and padding.
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0,
                                         num_replicas_in_sync=2)
    batches = list(input_fn(context, 3))
    assert len(batches) == 1
    np.testing.assert_array_equal(batches[0]["is_real_example"][:, 0], [1, 0, 0])
    np.testing.assert_array_equal(batches[0]["input_ids"][1:], 0)
    single = list(input_fn(tf.distribute.InputContext(), 3))
    np.testing.assert_array_equal(single[0]["is_real_example"][:, 0], [1, 1, 0])
    np.testing.assert_array_equal(single[0]["label_ids"][:, 0], [1, 0, 0])


def test_eval_metrics_use_real_examples_only():
    task = classification.get_task("cola")
    rows = [{"is_real_example": 1, "label_ids": 1, "probabilities": np.array([0.2, 0.8])},
            {"is_real_example": 1, "label_ids": 0, "probabilities": np.array([0.9, 0.1])},
            {"is_real_example": 1, "label_ids": 0, "probabilities": np.array([0.4, 0.6])},
            {"is_real_example": 0, "label_ids": 0, "probabilities": np.array([0.1, 0.9])}]
    loop = {"classifier_loss": 0.5, "loss": 0.6, "accuracy": 2 / 3, "global_step": 7.0}
    results = classifier_task.eval_metrics(task, loop, rows)
    # preds (1, 0, 1) vs labels (1, 0, 0): TP=1 TN=1 FP=1 FN=0 → MCC = 1 / sqrt(2·1·2·1).
    assert results == pytest.approx({"eval_loss": 0.5, "loss": 0.6, "eval_accuracy": 2 / 3,
                                     "global_step": 7, "eval_mcc": 0.5})


def test_results_files_format(tmp_path):
    path = str(tmp_path / "eval_results.txt")
    finetuning.write_results(path, {"loss": 0.25, "eval_accuracy": 0.5, "global_step": 3})
    assert open(path).read() == "eval_accuracy = 0.5\nglobal_step = 3\nloss = 0.25\n"
    path = str(tmp_path / "test_results.tsv")
    assert classifier_task.write_test_results(path, [np.array([0.25, 0.75]), np.array([1.0, 0.0])]) == 2
    assert open(path).read() == "0.25\t0.75\n1.0\t0.0\n"
    classifier_task.write_test_results(path, [np.float32(2.5), np.float32(-0.125)])
    assert open(path).read() == "2.5\n-0.125\n"
    assert finetuning.num_train_steps(3668, 32, 3.0) == 343  # MRPC's train set


def test_run_errors(tmp_path, tiny_config):
    config_file = str(tmp_path / "bert_config.json")
    tiny_config.to_json_file(config_file)
    run_config = training.RunConfig(output_dir=str(tmp_path / "run"))
    base = dict(task_name="sst-2", data_dir=os.path.join(GLUE, "SST-2"), bert_config_file=config_file,
                vocab_file=os.path.join(GLUE, "vocab.txt"))
    with pytest.raises(ValueError, match="nothing to do"):
        classifier_task.run_classifier(classifier_task.ClassifierOptions(**base), run_config)
    with pytest.raises(ValueError, match="max_seq_length=128 is longer than the model's "
                                         "max_position_embeddings=64"):
        classifier_task.run_classifier(classifier_task.ClassifierOptions(**base, do_eval=True), run_config)
    custom = dict(base, task_name="custom", custom_spec={"text_a": 0, "label": 1,
                                                          "train_file": "missing.tsv"})
    with pytest.raises(ValueError, match="missing.tsv: not found.*gives no 'labels'"):
        classifier_task.run_classifier(classifier_task.ClassifierOptions(
            **custom, max_seq_length=16, do_predict=True), run_config)
    with pytest.raises(ValueError, match="2 training examples make no full batch of 32"):
        classifier_task.run_classifier(classifier_task.ClassifierOptions(
            **base, max_seq_length=16, do_train=True), run_config)


def test_demo_task_learns_and_exports(demo_run):
    run, out, export = demo_run
    run.wait()

    results = read_results(out / "eval_results.txt")
    assert sorted(results) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
    assert results["global_step"] == 150
    assert results["eval_accuracy"] >= 0.9, results
    assert (out / "label_list.txt").read_text() == "0\n1\n"

    rows = np.loadtxt(out / "test_results.tsv", delimiter="\t", ndmin=2)
    assert rows.shape == (200, 2)  # the 8 padding rows of the last batch are not written
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-5)
    # The test file has no labels; its sentences carry their cue words.
    generator = _load_generator()
    with open(os.path.join(DEMO, "test.tsv"), encoding="utf-8") as f:
        sentences = [line.rstrip("\n").split("\t")[1] for line in f][1:]
    cues = [int(any(word in generator.POSITIVE for word in s.split())) for s in sentences]
    assert np.mean(rows.argmax(axis=1) == np.array(cues)) >= 0.9

    # The SavedModel gives the probabilities the Keras model wrote, on the cached test records
    # (loading it needs the in-graph tokenizer's ops registered, as every export does).
    import tensorflow_text  # noqa: F401
    schema = record_schemas.classifier_schema(16)
    records = [schema.decode(r.numpy()) for r in tf.data.TFRecordDataset(str(out / "predict.tf_record"))]
    assert len(records) == 200
    features = {k: tf.constant(np.stack([r[k] for r in records]), tf.int32)
                for k in ("input_ids", "input_mask", "segment_ids")}
    loaded = tf.saved_model.load(str(export))
    got = loaded.signatures[serving.IDS_SIGNATURE_KEY](**features)["probabilities"].numpy()
    np.testing.assert_allclose(got, rows, atol=2e-6)
    assert [label.decode() for label in loaded.labels.numpy()] == ["0", "1"]
