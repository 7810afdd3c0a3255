"""The shared record schemas: our encoder == tf.train.Example, write -> parse round trips, clear errors."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.records import features, tfrecord

S, P, R = 13, 5, 7


def _random_values(rng, rows=R, seq=S, preds=P, big_ids=False):
    high = 2 ** 40 if big_ids else 30522
    return {
        "input_ids": rng.integers(0, high, (rows, seq)),
        "input_mask": rng.integers(0, 2, (rows, seq)),
        "segment_ids": rng.integers(0, 2, (rows, seq)),
        "masked_lm_positions": rng.integers(0, seq, (rows, preds)),
        # negative ids take 10-byte varints: the encoder must still match protobuf
        "masked_lm_ids": rng.integers(-3, high, (rows, preds)),
        "masked_lm_weights": rng.random((rows, preds)).astype(np.float32),
        "next_sentence_labels": rng.integers(0, 2, (rows, 1)),
    }


@pytest.mark.parametrize("big_ids", [False, True])
def test_encode_batch_is_byte_equal_to_tf_example(big_ids):
    schema = features.pretraining_schema(S, P)
    values = _random_values(np.random.default_rng(1), big_ids=big_ids)
    data, offsets = schema.encode_batch(values)
    assert len(offsets) == R + 1
    for r in range(R):
        expected = schema.to_tf_example({k: v[r] for k, v in values.items()}).SerializeToString(deterministic=True)
        assert data[offsets[r]:offsets[r + 1]].tobytes() == expected


def test_empty_feature_and_single_record_encode():
    schema = features.Schema("odd", [features.Feature("b", 0), features.Feature("a", 3, features.FLOAT32)])
    values = {"a": [1.5, -2.0, 0.0], "b": np.zeros(0, np.int64)}
    assert schema.encode(values) == schema.to_tf_example(values).SerializeToString(deterministic=True)


def test_write_then_parse_round_trip(tmp_path):
    schema = features.pretraining_schema(S, P)
    values = _random_values(np.random.default_rng(2))
    data, offsets = schema.encode_batch(values)
    framed, _ = tfrecord.frame_records(data, offsets)
    path = tmp_path / "r.tfrecord"
    path.write_bytes(framed.tobytes())
    dataset = tf.data.TFRecordDataset(str(path)).batch(4).map(features.make_parse_fn(S, P))
    parsed = {k: np.concatenate([b[k].numpy() for b in dataset]) for k in values}
    for name, expected in values.items():
        if name == "masked_lm_weights":
            assert parsed[name].dtype == np.float32
            np.testing.assert_array_equal(parsed[name], expected)
        else:
            assert parsed[name].dtype == np.int32  # the original's readers cast int64 -> int32
            np.testing.assert_array_equal(parsed[name], expected.astype(np.int32))
    single = next(iter(tf.data.TFRecordDataset(str(path)).map(features.make_parse_fn(S, P))))
    np.testing.assert_array_equal(single["input_ids"].numpy(), values["input_ids"][0].astype(np.int32))
    decoded = schema.decode(data[offsets[1]:offsets[2]].tobytes())
    np.testing.assert_array_equal(decoded["masked_lm_ids"], values["masked_lm_ids"][1])


def test_framing_matches_tf_record_writer(tmp_path):
    rng = np.random.default_rng(3)
    records = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in (0, 1, 3, 4, 5, 700, 733, 9)]
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in records])]).astype(np.int64)
    framed, framed_offsets = tfrecord.frame_records(np.frombuffer(b"".join(records), np.uint8), offsets)
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    assert framed.tobytes() == open(path, "rb").read()
    assert framed_offsets[-1] == len(framed)
    assert list(tfrecord.read_records(path)) == records


def test_corrupt_record_is_reported(tmp_path):
    path = tmp_path / "bad.tfrecord"
    data, offsets = features.pretraining_schema(S, P).encode_batch(_random_values(np.random.default_rng(4)))
    framed = bytearray(tfrecord.frame_records(data, offsets)[0].tobytes())
    framed[40] ^= 1
    path.write_bytes(bytes(framed))
    with pytest.raises(ValueError, match="bad.tfrecord: corrupt TFRecord data"):
        list(tfrecord.read_records(path))


def test_length_mismatch_names_file_and_flag(tmp_path):
    path = tmp_path / "s13.tfrecord"
    data, offsets = features.pretraining_schema(S, P).encode_batch(_random_values(np.random.default_rng(5)))
    path.write_bytes(tfrecord.frame_records(data, offsets)[0].tobytes())
    features.pretraining_schema(S, P).check_files([path])
    with pytest.raises(ValueError, match=r"s13.tfrecord: feature input_ids holds 13 values but 128 .*--max_seq_length"):
        features.pretraining_schema(128, P).check_files([path])
    with pytest.raises(ValueError, match=r"holds 5 values but 20 .*--max_predictions_per_seq"):
        features.pretraining_schema(S, 20).check_files([path])


def test_bad_shapes_are_rejected():
    schema = features.pretraining_schema(S, P)
    values = _random_values(np.random.default_rng(6))
    values["input_ids"] = values["input_ids"][:, :-1]
    with pytest.raises(ValueError, match=r"input_ids has shape \(7, 12\), expected \[R, 13\]"):
        schema.encode_batch(values)
    with pytest.raises(ValueError, match="missing features"):
        schema.encode_batch({"input_ids": values["input_ids"]})
