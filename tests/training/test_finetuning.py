"""The pieces the fine-tuning scripts share: flags with the original's defaults, flags → options and
RunConfig, and the original's count of steps from epochs."""

import logging
import os

import pytest
import tensorflow as tf
from absl import flags

from bert_tf.tasks.classifier import task as classifier_task
from bert_tf.tasks.ner import task as ner_task
from bert_tf.tasks.squad import records as squad_records
from bert_tf.tasks.squad import task as squad_task
from bert_tf.cli import flags as training_flags
from bert_tf.tasks import finetuning
from bert_tf.training import loop as training
from conftest import TESTDATA


def _flag_values(**kwargs) -> flags.FlagValues:
    flag_values = flags.FlagValues()
    training_flags.define_model_flags(flag_values=flag_values, **{
        k: v for k, v in kwargs.items() if k in ("tokenizer", "output_dir")})
    training_flags.define_finetuning_flags(flag_values=flag_values, **{
        k: v for k, v in kwargs.items() if k == "with_eval"})
    return flag_values


def test_shared_flags_have_the_originals_defaults():
    flag_values = _flag_values()
    defaults = {name: flag_values[name].default for name in flag_values}
    assert defaults == {
        "bert_config_file": None, "albert_config_file": None, "electra_config_file": None,
        "init_checkpoint": None,
        "vocab_file": None, "spm_model_file": None, "do_lower_case": True, "output_dir": None,
        "do_train": False, "do_eval": False, "do_predict": False, "train_batch_size": 32,
        "eval_batch_size": 8, "predict_batch_size": 8, "learning_rate": 5e-5,
        "num_train_epochs": 3.0, "warmup_proportion": 0.1,
        "layerwise_lr_decay": 1.0}  # off: every layer at --learning_rate, as the original
    # run_squad.py has no eval flags; run_pretraining.py no tokenizer; extract_features.py no
    # output directory.
    assert not {"do_eval", "eval_batch_size"} & set(_flag_values(with_eval=False))
    assert not {"vocab_file", "spm_model_file", "do_lower_case"} & set(
        _flag_values(tokenizer=False))
    assert "output_dir" not in set(_flag_values(output_dir=False))


def test_flags_named_like_fields_set_them():
    flag_values = _flag_values()
    flags.DEFINE_string("data_dir", None, "", flag_values=flag_values)
    flags.DEFINE_integer("max_seq_length", 128, "", flag_values=flag_values)
    flags.DEFINE_list("labels", None, "", flag_values=flag_values)
    flag_values(["prog", "--bert_config_file=c.json", "--vocab_file=v.txt", "--data_dir=d",
                 "--nodo_lower_case", "--do_eval", "--max_seq_length=64", "--labels=O,B-X",
                 "--num_train_epochs=2", "--output_dir=out", "--train_batch_size=4",
                 "--learning_rate=1e-3", "--init_checkpoint=ckpt"])
    options = training_flags.options_from_flags(flag_values, ner_task.NerOptions,
                                                labels=tuple(flag_values.labels))
    assert options == ner_task.NerOptions(
        bert_config_file="c.json", vocab_file="v.txt", data_dir="d", do_lower_case=False,
        do_eval=True, max_seq_length=64, labels=("O", "B-X"), num_train_epochs=2.0)
    config = training_flags.run_config_from_flags(flag_values, eval_batch_size=3)
    assert config == training.RunConfig(output_dir="out", train_batch_size=4, eval_batch_size=3,
                                        learning_rate=1e-3, init_checkpoint="ckpt")


def test_squad_options_shape_the_windows():
    options = squad_task.SquadOptions(bert_config_file="c.json", max_seq_length=40,
                                      doc_stride=16, max_query_length=12, do_lower_case=False,
                                      version_2_with_negative=True)
    assert options.features == squad_records.FeatureSettings(
        max_seq_length=40, doc_stride=16, max_query_length=12, do_lower_case=False,
        version_2_with_negative=True)
    assert squad_task.SquadOptions(bert_config_file="c.json").max_seq_length == 384
    assert options.tokenizer_files == []


def test_epochs_give_the_originals_step_counts():
    options = finetuning.FinetuningOptions(bert_config_file="c.json")
    config = training.RunConfig(output_dir="out", train_batch_size=32)
    # MRPC: int(3668 / 32 · 3) = 343 updates, int(343 · 0.1) = 34 of warm-up.
    assert finetuning.epochs_run_config(config, options, 3668) == config.replace(
        num_train_steps=343, num_warmup_steps=34)
    with pytest.raises(ValueError, match="10 training windows make no full batch of 32 in 3.0"):
        finetuning.epochs_run_config(config, options, 10, "training windows")



def test_every_fine_tuning_tokenizer_checks_the_case_against_the_checkpoint(tmp_path, caplog):
    """The classifier, SQuAD and NER runs all build their tokenizer through FinetuningOptions."""
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
    options = finetuning.FinetuningOptions(bert_config_file="unused.json",
                                           vocab_file=str(vocab_file), do_lower_case=False)
    with caplog.at_level(logging.WARNING):
        tokenizer = options.create_tokenizer(
            str(tmp_path / "uncased_L-12_H-768_A-12" / "bert_model.ckpt"))
    assert tokenizer.tokenize("hello") == ["hello"]
    assert "--do_lower_case=True" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        options.create_tokenizer(str(tmp_path / "cased_L-12_H-768_A-12" / "bert_model.ckpt"))
    assert "do_lower_case" not in caplog.text


def test_static_shapes_turn_dynamic_padding_off_under_xla_and_tpu(tiny_config, tmp_path, caplog,
                                                                  monkeypatch):
    """Under --use_xla (or a TPU) every new batch length is a new compilation: the classifier's
    training batches keep --max_seq_length, with one log line; elsewhere they are trimmed."""
    config_file = str(tmp_path / "bert_config.json")
    tiny_config.to_json_file(config_file)
    glue = os.path.join(TESTDATA, "glue")
    options = classifier_task.ClassifierOptions(
        task_name="sts-b", data_dir=os.path.join(glue, "STS-B"), bert_config_file=config_file,
        vocab_file=os.path.join(glue, "vocab.txt"), max_seq_length=13, do_train=True,
        group_by_length=True)
    input_fns = []
    monkeypatch.setattr(training, "train", lambda task, config, input_fn, *args:
                        input_fns.append(input_fn) or {})

    def train_batch_shape(**run_options):
        run_config = training.RunConfig(output_dir=str(tmp_path / "run"), train_batch_size=2,
                                        **run_options)
        classifier_task.run_classifier(options, run_config)
        dataset = input_fns.pop()(tf.distribute.InputContext(), 2)
        return dataset.element_spec["input_ids"].shape.as_list()

    with caplog.at_level(logging.INFO, logger="absl"):
        assert train_batch_shape() == [2, None]
        assert "--dynamic_padding" not in caplog.text
        assert train_batch_shape(use_xla=True) == [2, 13]
    assert [r.getMessage() for r in caplog.records if "--dynamic_padding" in r.getMessage()] == [
        "--dynamic_padding and --group_by_length are off under --use_xla: every batch keeps the "
        "--max_seq_length shape (one compilation)"]
    tpu = tf.distribute.TPUStrategy.__new__(tf.distribute.TPUStrategy)  # only its type is read
    with caplog.at_level(logging.INFO, logger="absl"):
        off = finetuning.static_shape_options(options, training.RunConfig(output_dir="x"), tpu)
    assert (off.dynamic_padding, off.group_by_length) == (False, False)
    assert "under --use_tpu" in caplog.text
    kept = finetuning.static_shape_options(options, training.RunConfig(output_dir="x"), None)
    assert kept is options
