"""Writes the checkpoints and outputs that tests/checkpoints/test_google_reference.py holds
bert_tf to: made by google-research/electra's and google-research/albert's own model code.

    git clone https://github.com/google-research/electra /tmp/electra
    git clone https://github.com/google-research/albert /tmp/albert
    pip install --target /tmp/tf_keras --no-deps 'tf-keras==2.21.*'
    PYTHONPATH=/tmp/tf_keras python tests/testdata/google_reference/generate.py \
        --electra_repo=/tmp/electra --albert_repo=/tmp/albert

The reference code is TF1 (`tf.compat.v1` graphs, `tf.layers`, `tf.contrib`): it runs unmodified
on TensorFlow 2.21 with tf-keras behind `tf.compat.v1.layers` (TF_USE_LEGACY_KERAS) and two
stand-ins for what TensorFlow 2 dropped: `tf.contrib.layers.layer_norm`, rebuilt as TF 1.15 defines
it (moments over the last axis, `batch_normalization` with variance_epsilon 1e-12, variables
`LayerNorm/beta` and `LayerNorm/gamma`), and `tf.estimator`'s hook base classes, which only the
reference's training scripts subclass. Neither the reference code nor tf-keras is a dependency of
bert_tf or of its tests: this script is run once, by hand, and its outputs are committed.

For each case it writes into this directory:
  <case>/model.ckpt-0.*      the reference's training checkpoint: every variable its pretraining
                             graph creates (ELECTRA: generator, discriminator, both prediction heads,
                             the Adam slots and global_step; ALBERT: encoder, pooler, both heads, the
                             LAMB slots), random weights with every bias and LayerNorm perturbed
  <case>/electra_config.json or albert_config.json, as a user of the reference writes it for bert_tf
  <case>/reference.npz       the inputs, and the reference's outputs on them: the embeddings, every
                             layer, the head outputs; for ELECTRA also the reference's outputs when it
                             reads bert_tf's export of the same model (`export_*` arrays)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import types

if sys.argv[1:2] != ["--export"]:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1
HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(92)]  # 97
SEQ, BATCH = 11, 3
# ELECTRA: embeddings 24 projected to hidden 32 (ELECTRA-Small's shape), and equal widths.
ELECTRA_CASES = {"electra_projected": 24, "electra_same_width": None}
# Weights drawn wider than released models' 0.02 so that the activations' inputs spread over
# [-3, 3] as trained models' do, where the two GELUs differ (by up to 1e-3 in every layer here;
# at 0.02 the inputs stay near 0 and the two agree within 1e-5).
INITIALIZER_RANGE = 0.3
ELECTRA_HPARAMS = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "intermediate_size": 37, "max_position_embeddings": 40, "type_vocab_size": 2,
                   "initializer_range": INITIALIZER_RANGE}
ALBERT_CONFIG = {"vocab_size": len(VOCAB), "embedding_size": 16, "hidden_size": 32,
                 "num_hidden_layers": 3, "num_hidden_groups": 1, "inner_group_num": 1,
                 "num_attention_heads": 4, "intermediate_size": 37, "hidden_act": "gelu",
                 "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
                 "max_position_embeddings": 40, "type_vocab_size": 2,
                 "initializer_range": INITIALIZER_RANGE}


def _layer_norm(inputs, center=True, scale=True, begin_norm_axis=1, begin_params_axis=-1,
                scope=None, **_):
    """tf.contrib.layers.layer_norm of TensorFlow 1.15 (the reference calls it with
    begin_norm_axis=-1, begin_params_axis=-1)."""
    with v1.variable_scope(scope, default_name="LayerNorm"):
        shape = inputs.shape[begin_params_axis:]
        beta = v1.get_variable("beta", shape, initializer=v1.zeros_initializer())
        gamma = v1.get_variable("gamma", shape, initializer=v1.ones_initializer())
        axes = list(range(begin_norm_axis % inputs.shape.ndims, inputs.shape.ndims))
        mean, variance = tf.nn.moments(inputs, axes, keepdims=True)
        return tf.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma,
                                         variance_epsilon=1e-12)


def _install_stand_ins() -> None:
    contrib = types.ModuleType("tensorflow.contrib")
    contrib.layers = types.SimpleNamespace(layer_norm=_layer_norm)
    for name in ("cluster_resolver", "data", "tpu", "training"):
        setattr(contrib, name, types.SimpleNamespace())
    sys.modules["tensorflow.contrib"] = contrib
    v1.estimator = types.SimpleNamespace(SessionRunHook=object, SessionRunArgs=tuple)


def _batch() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    ids = np.zeros([BATCH, SEQ], np.int32)
    mask = np.zeros([BATCH, SEQ], np.int32)
    segments = np.zeros([BATCH, SEQ], np.int32)
    for row, length in enumerate([11, 4, 9]):  # padding in every row but the first
        ids[row, :length] = rng.integers(5, len(VOCAB), length)
        ids[row, 0] = 2
        mask[row, :length] = 1
        segments[row, length // 2:length] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def _perturb(session, seed: int) -> None:
    """Biases and LayerNorms made non-trivial, so that every weight matters."""
    rng = np.random.default_rng(seed)
    for var in v1.global_variables():
        name = var.op.name
        if (name.endswith(("bias", "beta", "gamma")) and "adam" not in name
                and "lamb" not in name.lower()):
            value = session.run(var)
            var.load(value + rng.standard_normal(value.shape).astype(np.float32) * 0.1, session)


def _layers(model) -> dict:
    """Every layer's output (ELECTRA's model stacks them in one [L, B, S, H] tensor)."""
    layers = model.get_all_encoder_layers()
    layers = tf.unstack(layers) if isinstance(layers, tf.Tensor) else layers
    return {f"layer_{i}": layer for i, layer in enumerate(layers)}


def _save(session, case_dir: str) -> None:
    """The training checkpoint as google's scripts save it, its state file naming it relatively
    (a Saver writes the absolute path of the machine it ran on)."""
    v1.train.Saver().save(session, os.path.join(case_dir, "model.ckpt"), global_step=0,
                          write_meta_graph=False)
    with open(os.path.join(case_dir, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model.ckpt-0"\n'
                'all_model_checkpoint_paths: "model.ckpt-0"\n')


def _placeholders():
    return {name: v1.placeholder(tf.int32, [BATCH, SEQ], name)
            for name in ("input_ids", "input_mask", "segment_ids")}


# ---------------------------------------------------------------------------------- ELECTRA

def _electra_discriminator(repo_modules, hparams, embedding_size, features):
    """google's discriminator on `features`: its BertModel under scope "electra" and
    PretrainingModel._get_discriminator_output's head."""
    modeling, run_pretraining = repo_modules
    bert_config = modeling.BertConfig.from_dict({"vocab_size": len(VOCAB), **hparams})
    model = modeling.BertModel(
        bert_config=bert_config, is_training=False, input_ids=features["input_ids"],
        input_mask=features["input_mask"], token_type_ids=features["segment_ids"],
        use_one_hot_embeddings=False, scope="electra", embedding_size=embedding_size)
    head = types.SimpleNamespace(_bert_config=bert_config,
                                 _config=types.SimpleNamespace(electric_objective=False))
    run_pretraining.PretrainingModel._get_discriminator_output(
        head, types.SimpleNamespace(input_mask=features["input_mask"]), model,
        tf.zeros_like(features["input_ids"]))
    # The head returns probabilities; its logits are the squeezed second dense layer.
    logits = v1.get_default_graph().get_tensor_by_name("discriminator_predictions/Squeeze:0")
    return {"embedding_output": model.get_embedding_output(),
            **_layers(model), "discriminator_logits": logits}


def _electra_training_checkpoint(repo, modules, case_dir, embedding_size) -> None:
    """google's PretrainingModel and create_optimizer, variables initialised and saved."""
    import configure_pretraining  # noqa: PLC0415 (from the reference checkout)
    from model import optimization  # noqa: PLC0415
    _, run_pretraining = modules
    vocab_file = os.path.join(case_dir, "vocab.txt")
    config = configure_pretraining.PretrainingConfig(
        "reference", case_dir, vocab_file=vocab_file, vocab_size=len(VOCAB),
        max_seq_length=SEQ, embedding_size=embedding_size, model_size="small",
        model_hparam_overrides=ELECTRA_HPARAMS, generator_hidden_size=0.25)
    with tf.Graph().as_default():
        v1.set_random_seed(7)
        features = {"input_ids": tf.constant(_batch()["input_ids"]),
                    "input_mask": tf.constant(_batch()["input_mask"]),
                    "segment_ids": tf.constant(_batch()["segment_ids"])}
        model = run_pretraining.PretrainingModel(config, features, is_training=True)
        optimization.create_optimizer(model.total_loss, 1e-4, 10, warmup_steps=1)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            _perturb(session, 3)
            _save(session, case_dir)


def _electra_outputs(modules, prefix, embedding_size, batch) -> dict[str, np.ndarray]:
    """google's discriminator restored from `prefix` (only the variables it creates)."""
    with tf.Graph().as_default():
        features = _placeholders()
        outputs = _electra_discriminator(modules, ELECTRA_HPARAMS, embedding_size, features)
        with v1.Session() as session:
            v1.train.Saver(v1.global_variables()).restore(session, prefix)
            return session.run(outputs, {features[k]: batch[k] for k in features})


def _bert_tf_export(case_dir: str, export_dir: str) -> str:
    """bert_tf reads the reference checkpoint and exports the discriminator in google's layout
    (in a process of its own: bert_tf runs on Keras 3, the reference on tf-keras)."""
    prefix = os.path.join(export_dir, "bert_model.ckpt")
    env = {k: v for k, v in os.environ.items() if k not in ("TF_USE_LEGACY_KERAS", "PYTHONPATH")}
    subprocess.run([sys.executable, __file__, "--export", os.path.join(case_dir, "model.ckpt-0"),
                    prefix], check=True, env=env, cwd=os.path.join(HERE, "..", "..", ".."))
    return prefix


def export_with_bert_tf(checkpoint: str, prefix: str) -> None:
    from bert_tf.checkpoints import model_config  # noqa: PLC0415
    from bert_tf.checkpoints import name_map  # noqa: PLC0415
    from bert_tf.model.electra.modeling import DiscriminatorModel  # noqa: PLC0415
    model = DiscriminatorModel(model_config.resolve_model_config(None, checkpoint))
    name_map.init_from_checkpoint(model, checkpoint)
    name_map.export_google_checkpoint(model, prefix)


def electra_case(repo: str, case: str, embedding_size: int | None) -> None:
    case_dir = os.path.join(HERE, case)
    os.makedirs(case_dir, exist_ok=True)
    with open(os.path.join(case_dir, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    if os.path.abspath(repo) not in sys.path:
        sys.path.insert(0, os.path.abspath(repo))
    from model import modeling  # noqa: PLC0415
    import run_pretraining  # noqa: PLC0415
    modules = (modeling, run_pretraining)
    _electra_training_checkpoint(repo, modules, case_dir, embedding_size)
    # As docs/electra.md asks a user of google's checkpoints to write it: google's values.
    user_config = {"model_type": "electra", "vocab_size": len(VOCAB), **ELECTRA_HPARAMS,
                   "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
                   "attention_probs_dropout_prob": 0.1}
    if embedding_size:
        user_config["embedding_size"] = embedding_size
    with open(os.path.join(case_dir, "electra_config.json"), "w") as f:
        json.dump(user_config, f, indent=2, sort_keys=True)
    batch = _batch()
    outputs = _electra_outputs(modules, os.path.join(case_dir, "model.ckpt-0"), embedding_size,
                               batch)
    export = _bert_tf_export(case_dir, tempfile.mkdtemp(prefix=f"bert_tf_export_{case}_"))
    exported = _electra_outputs(modules, export, embedding_size, batch)
    np.savez(os.path.join(case_dir, "reference.npz"), **batch, **outputs,
             **{f"export_{k}": v for k, v in exported.items()})
    os.remove(os.path.join(case_dir, "vocab.txt"))
    print(case, {k: v.shape for k, v in outputs.items()},
          "export vs original:", max(float(np.abs(exported[k] - outputs[k]).max())
                                     for k in outputs))


# ---------------------------------------------------------------------------------- ALBERT

def albert_case(repo: str) -> None:
    """google-research/albert's AlbertModel with run_pretraining's masked-LM and sentence-order
    heads and its LAMB optimizer."""
    case_dir = os.path.join(HERE, "albert")
    os.makedirs(case_dir, exist_ok=True)
    # The reference imports itself as the package `albert`.
    packages = tempfile.mkdtemp()
    os.symlink(os.path.abspath(repo), os.path.join(packages, "albert"))
    sys.path.insert(0, packages)
    sys.path.insert(0, repo)
    from albert import modeling as albert_modeling  # noqa: PLC0415
    from albert import optimization as albert_optimization  # noqa: PLC0415
    from albert import run_pretraining as albert_pretraining  # noqa: PLC0415
    batch = _batch()
    positions = np.array([[1, 3, 0], [2, 0, 0], [4, 6, 8]], np.int32)
    with tf.Graph().as_default():
        v1.set_random_seed(11)
        features = _placeholders()
        config = albert_modeling.AlbertConfig.from_dict(ALBERT_CONFIG)
        model = albert_modeling.AlbertModel(
            config=config, is_training=False, input_ids=features["input_ids"],
            input_mask=features["input_mask"], token_type_ids=features["segment_ids"],
            use_one_hot_embeddings=False)
        mlm_loss, _, mlm_log_probs = albert_pretraining.get_masked_lm_output(
            config, model.get_sequence_output(), model.get_embedding_table(),
            tf.constant(positions), tf.zeros_like(positions), tf.ones(positions.shape))
        sop_loss, _, sop_log_probs = albert_pretraining.get_sentence_order_output(
            config, model.get_pooled_output(), tf.zeros([BATCH], tf.int32))
        albert_optimization.create_optimizer(mlm_loss + sop_loss, 1e-4, 10, 1, False,
                                             optimizer="lamb")
        outputs = {"embedding_output": model.get_embedding_output(),
                   **_layers(model),
                   "pooled_output": model.get_pooled_output(),
                   "masked_lm_log_probs": mlm_log_probs,
                   "sentence_order_log_probs": sop_log_probs}
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            _perturb(session, 4)
            _save(session, case_dir)
            values = session.run(outputs, {features[k]: batch[k] for k in features})
    with open(os.path.join(case_dir, "albert_config.json"), "w") as f:
        json.dump(ALBERT_CONFIG, f, indent=2, sort_keys=True)
    np.savez(os.path.join(case_dir, "reference.npz"), **batch, masked_lm_positions=positions,
             **values)
    print("albert", {k: v.shape for k, v in values.items()})


def main() -> None:
    if sys.argv[1:2] == ["--export"]:
        export_with_bert_tf(*sys.argv[2:4])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--electra_repo", required=True)
    parser.add_argument("--albert_repo", required=True)
    args = parser.parse_args()
    _install_stand_ins()
    for case, embedding_size in ELECTRA_CASES.items():
        electra_case(args.electra_repo, case, embedding_size)
    for name in ("modeling", "optimization", "run_pretraining"):  # the ALBERT repo's own
        sys.modules.pop(name, None)
    sys.path.remove(os.path.abspath(args.electra_repo))
    albert_case(args.albert_repo)


if __name__ == "__main__":
    main()
