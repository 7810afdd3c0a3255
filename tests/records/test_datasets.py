"""Input pipelines: file patterns, sharding per input pipeline, determinism, clear errors."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.records import datasets, features
from support.pretraining_records import PRED, SEQ, pretraining_arrays, write_records

SCHEMA = features.pretraining_schema(SEQ, PRED)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """4 files of 6 records; record r of the set has input_ids[0] == r + 1000 (unique)."""
    directory = tmp_path_factory.mktemp("shards")
    paths = []
    for shard in range(4):
        arrays = pretraining_arrays(6, shard)
        arrays["input_ids"][:, 0] = 1000 + shard * 6 + np.arange(6)
        paths.append(write_records(directory / f"part-{shard}.tfrecord", arrays))
    return directory, paths


def _ids(dataset, batches=None):
    if batches is not None:
        dataset = dataset.take(batches)
    return [int(i) for batch in dataset for i in batch["input_ids"][:, 0].numpy()]


def test_patterns_globs_and_directories_resolve_to_sorted_files(shards, tmp_path):
    directory, paths = shards
    (directory / ".hidden").write_text("")
    assert datasets.resolve_input_files(str(directory)) == paths
    assert datasets.resolve_input_files(f"{paths[3]}, {directory}/part-[01].tfrecord") == [
        paths[0], paths[1], paths[3]]
    with pytest.raises(FileNotFoundError, match=r"--eval_input_file: nothing matches 'x\*'"):
        datasets.resolve_input_files(f"{paths[0]},x*", flag="eval_input_file")
    with pytest.raises(FileNotFoundError, match="--input_file is empty"):
        datasets.resolve_input_files(" , ")


def test_eval_reads_every_record_once_in_order(shards):
    _, paths = shards
    dataset = datasets.record_dataset(paths, SCHEMA, 5, is_training=False)
    assert _ids(dataset) == list(range(1000, 1024))
    batch = next(iter(dataset))
    assert batch["input_ids"].shape == (5, SEQ) and batch["input_ids"].dtype == tf.int32
    assert batch["masked_lm_weights"].dtype == tf.float32
    assert batch["next_sentence_labels"].shape == (5, 1)
    assert len(_ids(datasets.record_dataset(paths, SCHEMA, 5, is_training=False,
                                            drop_remainder=True))) == 20


def _context(pipelines, pipeline_id):
    return tf.distribute.InputContext(num_input_pipelines=pipelines,
                                      input_pipeline_id=pipeline_id, num_replicas_in_sync=pipelines)


@pytest.mark.parametrize("files", [4, 1], ids=["by_file", "by_record"])
def test_pipelines_read_disjoint_shards_that_cover_the_data(shards, files):
    _, paths = shards
    seen = [_ids(datasets.record_dataset(paths[:files], SCHEMA, 2, is_training=False,
                                         input_context=_context(2, i))) for i in range(2)]
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == list(range(1000, 1000 + 6 * files))
    # Training (shuffled, repeated) keeps each pipeline inside its own shard.
    for i in range(2):
        train = _ids(datasets.record_dataset(paths[:files], SCHEMA, 4, is_training=True,
                                             input_context=_context(2, i)), 8)
        assert set(train) <= set(seen[i]) and len(set(train)) > 1


def test_training_input_is_shuffled_repeated_and_seeded(shards):
    _, paths = shards
    def ids(seed):
        return _ids(datasets.record_dataset(paths, SCHEMA, 8, is_training=True, seed=seed), 6)
    first = ids(7)
    assert first == ids(7) and first != ids(8)
    assert set(first) <= set(range(1000, 1024)) and len(set(first)) > 12
    # Repeated: 48 records drawn from 24; shuffled: not in file order.
    assert len(first) == 48 and first[:24] != list(range(1000, 1024))


def test_a_record_of_another_length_names_its_file_and_flag(shards, tmp_path):
    _, paths = shards
    other = write_records(tmp_path / "long.tfrecord", pretraining_arrays(2, 0, seq=SEQ + 3),
                          seq=SEQ + 3)
    with pytest.raises(ValueError, match=f"{os.path.basename(other)}.*input_ids holds {SEQ + 3} "
                                         f"values but {SEQ}.*--max_seq_length"):
        datasets.record_dataset([paths[0], other], SCHEMA, 2, is_training=True)
