"""The Hugging Face parity harness the BERT, ALBERT and ELECTRA tests share: a transformers model
saved with save_pretrained (`hf_dir`), a batch (`batch`) and what transformers computes on it
(`reference`), as module-scoped fixtures a test module binds once:

    hf_dir, batch, reference = hf_parity.fixtures(
        transformers.AlbertForPreTraining, {"one_group": config, ...}, base="albert",
        batch=hf_parity.padded_batch(vocab_size=101, seed=7))

Each family's test then loads `hf_dir` into its own model and compares with `reference`.
Nothing is downloaded: the caller sets HF_HUB_OFFLINE before importing transformers."""

import dataclasses
from typing import Callable

import numpy as np
import pytest
import torch

LENGTHS = (11, 4, 9)  # padding in every row but the first


@dataclasses.dataclass(frozen=True)
class Reference:
    """transformers' outputs on the batch: `base` is the encoder's (last_hidden_state and, where
    the family has one, pooler_output), `pretraining` the whole model's (its logits), `state`
    the model's weights by their Hugging Face names."""
    base: object
    pretraining: object
    state: dict[str, np.ndarray]


def perturbed(model: torch.nn.Module, seed: int | None = None) -> torch.nn.Module:
    """Biases and LayerNorms made non-trivial (+N(0, 0.1)) so that every weight matters; `seed`
    reseeds torch first (None: the current stream goes on). Returns the model in eval mode."""
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name:
                param.add_(torch.randn_like(param) * 0.1)
    return model.eval()


def padded_batch(vocab_size: int, seed: int, lengths=LENGTHS) -> dict[str, np.ndarray]:
    """Random ids in [1, vocab_size) padded with zeros to the longest row, the second half of
    each row in segment 1: int32 [B,S] input_ids, input_mask and segment_ids."""
    rng = np.random.default_rng(seed)
    shape = [len(lengths), max(lengths)]
    ids, mask, segments = (np.zeros(shape, np.int32) for _ in range(3))
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(1, vocab_size, length)
        mask[row, :length] = 1
        segments[row, length // 2:length] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def torch_inputs(batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """The batch under transformers' argument names."""
    return {"input_ids": torch.tensor(batch["input_ids"], dtype=torch.long),
            "attention_mask": torch.tensor(batch["input_mask"], dtype=torch.long),
            "token_type_ids": torch.tensor(batch["segment_ids"], dtype=torch.long)}


def run_transformers(model_class, directory: str, batch: dict[str, np.ndarray],
                     base: str | None) -> Reference:
    """`model_class` loaded from `directory` (eager attention, as the original computes it) on
    the batch; `base` names its encoder attribute (None: the model is the encoder)."""
    model = model_class.from_pretrained(directory, attn_implementation="eager").eval()
    inputs = torch_inputs(batch)
    with torch.no_grad():
        pretraining = model(**inputs)
        encoder_output = pretraining if base is None else getattr(model, base)(**inputs)
    return Reference(encoder_output, pretraining,
                     {name: value.numpy() for name, value in model.state_dict().items()})


def fixtures(model_class, configs: dict, *, base: str | None,
             batch: dict[str, np.ndarray] | Callable[[], dict[str, np.ndarray]],
             construction_seed: Callable[[str], int] = lambda name: 0,
             perturb_seed: int | None = None, perturb: bool = True):
    """The module-scoped fixtures (hf_dir, batch, reference) of one family's parity tests.

    hf_dir: `model_class(configs[param])` drawn after torch.manual_seed(construction_seed(param)),
    `perturbed` (with `perturb_seed`) unless perturb=False, saved with save_pretrained; one per
    entry of `configs`, the test ids its keys. A str value is a model already on disk, used as
    it is. batch: `batch`, or what it returns. reference: `run_transformers` on them."""

    @pytest.fixture(scope="module", params=list(configs), name="hf_dir")
    def hf_dir(request, tmp_path_factory) -> str:
        config = configs[request.param]
        if isinstance(config, str):
            return config
        torch.manual_seed(construction_seed(request.param))
        model = model_class(config)
        model = perturbed(model, perturb_seed) if perturb else model.eval()
        directory = tmp_path_factory.mktemp(request.param)
        model.save_pretrained(directory)
        return str(directory)

    @pytest.fixture(scope="module", name="batch")
    def batch_fixture() -> dict[str, np.ndarray]:
        return batch() if callable(batch) else batch

    @pytest.fixture(scope="module", name="reference")
    def reference(hf_dir, batch) -> Reference:
        return run_transformers(model_class, hf_dir, batch, base)

    return hf_dir, batch_fixture, reference
