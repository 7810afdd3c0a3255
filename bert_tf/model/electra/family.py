"""The ELECTRA family's declaration (google-research/electra)."""

from __future__ import annotations

from bert_tf.model.config import GELU_TANH
from bert_tf.model.electra.config import ElectraConfig, electra_config_from_hf, is_electra_dict
from bert_tf.model.electra.modeling import ElectraEncoder
from bert_tf.model.family import ModelFamily

ELECTRA = ModelFamily(
    name="ELECTRA", config_class=ElectraConfig, encoder_class=ElectraEncoder,
    # google-research/electra's releases ship no config file; bert_tf writes this one.
    config_file="electra_config.json", claims=is_electra_dict, hf_model_type="electra",
    config_from_hf=electra_config_from_hf, hf_class_prefix="Electra", hf_export=False,
    files_say_model_type=True,
    # Until ELECTRA's "gelu" meant google's erf form here, bert_tf read it as the tanh form.
    legacy_activation_names={"gelu": GELU_TANH})
