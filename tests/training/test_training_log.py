"""eval_results.txt: the original's `key = value` text, written atomically."""

import os

import numpy as np

from bert_tf.training import log as training_log


def test_eval_results_file_has_the_original_format(tmp_path):
    path = str(tmp_path / "out" / "eval_results.txt")
    results = {"next_sentence_loss": np.float32(0.25), "global_step": np.int64(20),
               "masked_lm_accuracy": np.float32(0.125), "loss": np.float32(1.5),
               "next_sentence_accuracy": np.float32(1.0), "masked_lm_loss": np.float32(3.0)}
    training_log.write_eval_results(path, {"loss": 9})
    training_log.write_eval_results(path, results)  # Replaces the earlier file.
    with open(path) as f:
        assert f.read() == ("global_step = 20\nloss = 1.5\nmasked_lm_accuracy = 0.125\n"
                            "masked_lm_loss = 3.0\nnext_sentence_accuracy = 1.0\n"
                            "next_sentence_loss = 0.25\n")
    assert os.listdir(os.path.dirname(path)) == ["eval_results.txt"]
