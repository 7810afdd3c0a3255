"""The original BERT's functions written out in numpy (float64), for tests that compare a layer's
output with the formula rather than with another run of the same code."""

import math

import numpy as np

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def layer_norm(x: np.ndarray, layer, epsilon: float = 1e-12) -> np.ndarray:
    """LayerNorm over the last axis with `layer`'s gamma and beta (the original's epsilon)."""
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * layer.gamma.numpy() + layer.beta.numpy()


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """The original BERT's gelu: the tanh approximation."""
    return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))


def gelu_exact(x: np.ndarray) -> np.ndarray:
    """x * Phi(x) with the exact normal CDF (Hugging Face's "gelu")."""
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def log_softmax(x: np.ndarray) -> np.ndarray:
    """log softmax over the last axis (shifted by the maximum: no overflow)."""
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def softmax(x: np.ndarray) -> np.ndarray:
    return np.exp(log_softmax(x))


# bert_config.json's `hidden_act` (the original's vocabulary: "gelu" is the tanh form) → reference.
ACTIVATIONS = {"gelu": gelu_tanh, "gelu_tanh": gelu_tanh, "gelu_exact": gelu_exact, "relu": relu}
