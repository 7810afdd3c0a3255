"""SQuAD window records: the original's layout, read back equal, cached until an input changes."""

import os
import random
import shutil

import numpy as np
import tensorflow as tf

from bert_tf.records import features as record_schemas
from bert_tf.tasks.squad import examples as squad, records as squad_records
from conftest import TESTDATA
from support.squad_windows import squad_windows
from support.vocabularies import wordpiece_tokenizer

SQUAD_DIR = os.path.join(TESTDATA, "squad")
VOCAB = os.path.join(SQUAD_DIR, "vocab.txt")
SETTINGS = squad_records.FeatureSettings(max_seq_length=20, doc_stride=4, max_query_length=6)


tokenizer = wordpiece_tokenizer(VOCAB, scope="function", do_lower_case=True)


def _read_all(path, schema):
    records = list(tf.data.TFRecordDataset(path).batch(1000).map(schema.parse_fn()))
    return {k: np.concatenate([r[k].numpy() for r in records]) for k in records[0]}


def test_training_records_hold_the_shuffled_windows(tmp_path, tokenizer):
    train_file = os.path.join(SQUAD_DIR, "v1_train.json")
    cached = squad_records.cached_records(train_file, str(tmp_path), True, tokenizer, [VOCAB],
                                          SETTINGS, seed=7)
    assert cached.path == str(tmp_path / "train.tf_record")
    assert (cached.num_examples, cached.counts["skipped_answer_mismatch"]) == (3, 1)
    schema = record_schemas.squad_schema(20, is_training=True)
    assert [f.name for f in schema.features] == [
        "unique_ids", "input_ids", "input_mask", "segment_ids", "start_positions", "end_positions",
        "is_impossible"]
    records = _read_all(cached.path, schema)
    # The same windows as building them from the examples in the seeded shuffled order.
    examples, _ = squad.read_squad_examples(train_file, True)
    random.Random(7).shuffle(examples)
    expected, _ = squad_windows(examples, tokenizer, 20, 4, 6, True)
    assert cached.num_features == len(expected) == len(records["unique_ids"])
    np.testing.assert_array_equal(records["unique_ids"][:, 0], np.arange(len(expected)))
    for name in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(records[name], getattr(expected, name))
    for name in ("start_positions", "end_positions", "is_impossible"):
        np.testing.assert_array_equal(records[name][:, 0], getattr(expected, name))


def test_prediction_records_and_metadata_round_trip(tmp_path, tokenizer):
    predict_file = os.path.join(SQUAD_DIR, "v1_train.json")
    cached = squad_records.cached_records(predict_file, str(tmp_path), False, tokenizer, [VOCAB],
                                          SETTINGS)
    assert cached.path == str(tmp_path / "eval.tf_record") and cached.num_examples == 5
    schema = record_schemas.squad_schema(20, is_training=False)
    records = _read_all(cached.path, schema)
    assert sorted(records) == ["input_ids", "input_mask", "segment_ids", "unique_ids"]
    examples, _ = squad.read_squad_examples(predict_file, False)
    expected, _ = squad_windows(examples, tokenizer, 20, 4, 6, False)
    windows = squad_records.load_metadata(cached)
    for name, column in expected.columns().items():
        np.testing.assert_array_equal(getattr(windows, name), column, err_msg=name)
    np.testing.assert_array_equal(records["input_ids"], expected.input_ids)


def test_cache_is_reused_until_an_input_changes(tmp_path, tokenizer, monkeypatch):
    source = tmp_path / "train.json"
    shutil.copy(os.path.join(SQUAD_DIR, "v1_train.json"), source)
    out = str(tmp_path / "out")
    writes = []
    write_records = squad_records.write_records
    monkeypatch.setattr(squad_records, "write_records",
                        lambda *a, **k: writes.append(1) or write_records(*a, **k))

    def build(settings=SETTINGS, seed=12345):
        return squad_records.cached_records(str(source), out, True, tokenizer, [VOCAB], settings,
                                            seed)

    cached = build()
    assert build() == cached and len(writes) == 1  # reused, with the counts from the sidecar
    build(squad_records.FeatureSettings(20, 5, 6))
    build(seed=1)
    source.write_text(source.read_text().replace("Paris, France", "Paris,  France"))
    build()
    assert len(writes) == 4  # each change rebuilt the records
    # No temporary files are left behind.
    assert sorted(os.listdir(out)) == ["train.tf_record", "train.tf_record.json"]
