"""Shared fixtures: a tiny config whose sizes never coincide, so a transposed axis fails loudly."""

import gc
import os

# Scripts run by the tests inherit this, whatever the machine's environment says: at 0,
# TensorFlow's C++ INFO messages (some over two lines) come before a script's own output.
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

import pytest  # noqa: E402

from bert_tf.model.config import BertConfig  # noqa: E402
from support import collector  # noqa: E402

# The fixtures several modules share (char_model, spm_model).
pytest_plugins = ("support.fixtures",)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/ is one level down
TESTDATA = os.path.join(REPO, "tests", "testdata")


@pytest.fixture
def tiny_config() -> BertConfig:
    return BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)


def pytest_configure(config):
    config.addinivalue_line("markers", "heavy: a module whose tests train, export or start "
                                       "processes for 20 s or more; conftest runs these first")


def pytest_collection_modifyitems(config, items):
    """The `heavy` modules first, each still in its own order. `make test`'s workers take whole
    files in collection order, so the files left for the end are short ones and neither worker
    waits long for the other to finish its last file."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


def pytest_collection_finish(session):
    """Every test module is imported: what that made (TensorFlow, Keras, transformers, ...)
    lives until the worker exits, so full garbage collections need not walk it again each time
    (about a second each once the runs' leftovers make a million objects)."""
    gc.collect()
    gc.freeze()
    collector.collect_less_often()


def require_extra(module: str, extra: str):
    """Imports an optional package's `module`; without it the caller's tests skip, except under
    CI=true (`make test` sets it: it installed every extra), where a missing one is a failure."""
    import importlib
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        return importlib.import_module(module)
    message = f"{module} is not installed (the '{extra}' extra: pip install -e '.[cpu,{extra}]')"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}, but CI=true: `make test` installs it", pytrace=False)
    pytest.skip(message, allow_module_level=True)


@pytest.fixture
def beam_extra():
    """For `pytest.mark.usefixtures("beam_extra")`: apache-beam, as `require_extra` says."""
    return require_extra("apache_beam", "beam")


@pytest.fixture(scope="session")
def script_runner():
    """One server that runs the scripts' command lines, each in a fresh forked process, for the
    whole session (see script_runs.py): TensorFlow is imported once, not once per run."""
    from support.script_runs import ScriptRunner

    env = {key: value for key, value in os.environ.items() if key != "BERT_TF_TRACEBACK"}
    with ScriptRunner(env) as runner:
        yield runner


@pytest.fixture(scope="module")
def one_torch_thread():
    """For `pytest.mark.usefixtures("one_torch_thread")` in modules that check against
    transformers' PyTorch models: their forward passes are small matrices, and with two OpenMP
    threads each op waits for the other thread to be scheduled (milliseconds per op on a busy
    machine, spent spinning). One thread for the module, then torch's own setting again."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
