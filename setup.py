"""Installs the bert_tf library and its command-line scripts.

TensorFlow is an extra so that each platform picks its own build:
  pip install -e '.[cpu]'   tensorflow-cpu (the default in the README's commands)
  pip install -e '.[gpu]'   tensorflow[and-cuda]
  pip install -e '.[tpu]'   tensorflow-tpu (TPU VMs)

The raw-text exports (--export_dir, bert-predict) need tensorflow-text of the same X.Y release,
installed without its dependencies: its metadata requires the `tensorflow` distribution, which
would put a second TensorFlow beside tensorflow-cpu or tensorflow-tpu (`make install` does this):
  pip install --no-deps 'tensorflow-text==2.21.*'
No extra lists it for that reason.
"""

import os

from setuptools import find_packages, setup

SCRIPTS = {
    "bert-create-pretraining-data": "create_pretraining_data",
    "bert-run-pretraining": "run_pretraining",
    "bert-run-classifier": "run_classifier",
    "bert-run-squad": "run_squad",
    "bert-run-ner": "run_ner",
    "bert-run-swag": "run_swag",
    "bert-distill": "run_distillation",
    "bert-extract-features": "extract_features",
    "bert-build-vocab": "build_vocab",
    "bert-extend-vocab": "extend_vocab",
    "bert-predict": "predict",
    "bert-multitask": "run_multitask",
    "bert-export-hf": "export_hf",
    "bert-search": "search",
}
# Only scripts that exist are installed, so a checkout mid-way through the project still installs.
SCRIPTS = {cmd: mod for cmd, mod in SCRIPTS.items()
           if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), mod + ".py"))}

setup(
    name="bert_tf",
    version="0.1.0",
    description="BERT pretraining and fine-tuning on TensorFlow 2 and Keras 3",
    python_requires=">=3.10",
    packages=find_packages(include=["bert_tf", "bert_tf.*"]),
    py_modules=sorted(set(SCRIPTS.values())),
    # filelock: one run per output directory (bert_tf/cli/run_lock.py), in every script; 4.x starts
    # over when the file it locked was unlinked meanwhile, so deleting it at release is safe.
    # Floors that are true: TensorFlow 2.21 is the only release the suite runs on (constraints.txt
    # holds the tested set); the optimizer's Keras overrides need Keras 3.10+ (add_optimizer_variables;
    # see bert_tf/training/optimizers.py) and TensorFlow 2.21 itself asks for Keras 3.12+ and
    # numpy 1.26+.
    install_requires=["numpy>=1.26", "keras>=3.12", "sentencepiece>=0.1.99", "absl-py>=1.0",
                      "filelock>=4.0"],
    extras_require={
        "cpu": ["tensorflow-cpu>=2.21"],
        "gpu": ["tensorflow[and-cuda]>=2.21"],
        "tpu": ["tensorflow-tpu>=2.21"],
        # Chinese: --chinese_conversion (OpenCC) and --chinese_segmenter=jieba.
        "chinese": ["opencc>=1.1.6", "jieba>=0.42"],
        # torch + transformers: the reference forward pass the golden-value tests compare
        # against; import-linter: the layout's import contracts (.importlinter); pytest-xdist:
        # `make test` runs the suite in two processes (3.8: --no-loadscope-reorder).
        "test": ["pytest>=7", "pytest-xdist>=3.8", "torch>=2.1", "transformers>=4.40", "safetensors>=0.4",
                 "import-linter>=2.17", "pytorch-crf>=0.7", "scikit-learn>=1.3"],
        # create_pretraining_data.py --runner=beam (DirectRunner, Flink, Spark; Dataflow and gs://
        # need apache-beam[gcp]). Beam caps protobuf below 7; TensorFlow 2.21 takes 6.31.1 and up.
        "beam": ["apache-beam>=2.60"],
        # --export_runtime=openvino (--export_dtype=int8): the model on OpenVINO, quantized by
        # NNCF's post-training quantization (docs/serving.md, "OpenVINO exports").
        "openvino": ["openvino>=2025.0", "nncf>=2.16"],
    },
    entry_points={"console_scripts": [f"{cmd}={mod}:run" for cmd, mod in SCRIPTS.items()]},
)
