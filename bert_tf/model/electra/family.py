"""The ELECTRA family's declaration (google-research/electra)."""

from __future__ import annotations

from typing import Sequence

from bert_tf.model.bert.family import BLOCKS_FOUND
from bert_tf.model.config import GELU_TANH
from bert_tf.model.electra import names
from bert_tf.model.electra.config import ElectraConfig, electra_config_from_hf, is_electra_dict
from bert_tf.model.electra.modeling import DiscriminatorHead, ElectraEncoder, GeneratorPredictions
from bert_tf.model.family import ModelFamily


def refuse_checkpoint(kind: str | None, available: Sequence[str], source: str) -> str | None:
    """Why an ELECTRA discriminator cannot take a checkpoint: a generator's, or another
    family's (BERT's or ALBERT's names)."""
    if kind == names.GENERATOR_KIND:
        return (f"{source} holds an ELECTRA generator (generator/encoder/...) but no discriminator "
                f"(electra/encoder/...): fine-tuning, features and exports need the "
                f"discriminator: give the discriminator's checkpoint (google-research/electra's "
                f"pretraining checkpoint holds both; on Hugging Face, the -discriminator model)")
    if kind != names.DISCRIMINATOR and (kind or any(n.startswith("bert/") for n in available)):
        return (f"{source} is a BERT/ALBERT checkpoint but the model config is ELECTRA "
                f"(model_type electra): use the config released with the checkpoint")
    return None


def refuse_model(kind: str, family: ModelFamily, source: str) -> str:
    """Why an ELECTRA checkpoint cannot fill another family's model."""
    return (f"{source} is an {kind} checkpoint but the model config is not ELECTRA: give an "
            f"electra_config.json (or a config with \"model_type\": \"electra\") with "
            f"--electra_config_file")


ELECTRA = ModelFamily(
    name="ELECTRA", config_class=ElectraConfig, encoder_class=ElectraEncoder,
    # google-research/electra's releases ship no config file; bert_tf writes this one.
    config_file="electra_config.json", claims=is_electra_dict, hf_model_type="electra",
    config_from_hf=electra_config_from_hf, hf_class_prefix="Electra", hf_export=False,
    files_say_model_type=True,
    # Until ELECTRA's "gelu" meant google's erf form here, bert_tf read it as the tanh form.
    legacy_activation_names={"gelu": GELU_TANH},
    names=names.ENCODER, heads=(DiscriminatorHead, GeneratorPredictions), hf_prefix="electra.",
    hf_not_weights=names.HF_NOT_WEIGHTS, hf_encoder_names=names.hf_encoder_names,
    checkpoint_kinds=names.CHECKPOINT_KINDS, refuse_checkpoint=refuse_checkpoint,
    refuse_model=refuse_model, blocks_found=BLOCKS_FOUND)
