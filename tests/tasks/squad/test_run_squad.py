"""run_squad end to end: a tiny model learns templated questions, then predicts and evaluates.

One module-scoped training run (a few seconds); the tests then predict with it: v1.1 metrics,
v2.0 null odds with the `auto` threshold, and the script's flags (run_squad.py predicts in the
background while the other tests run, and is checked last).
"""

import dataclasses
import io
import json
import os
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.model import models
from bert_tf.model.config import BertConfig
from bert_tf.tasks.squad import examples as squad
from bert_tf.tasks.squad import metrics as squad_metrics
from bert_tf.tasks.squad import postprocess as squad_postprocess
from bert_tf.tasks.squad import records as squad_records
from bert_tf.tasks.squad import task as squad_task
from bert_tf.training import best_checkpoint, loop as training
from bert_tf.serving import openvino, ops, predict
from conftest import require_extra
from support import numpy_reference
from support.serving_client import run_client
from support.tiny_models import ScriptRun, words_of, write_tiny_model

NAMES = ["Anna", "Boris", "Clara", "Daniel", "Elena", "Felix", "Greta", "Hugo", "Irene", "Jonas"]
CITIES = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Dublin", "Vienna", "Quito", "Riga", "Bern"]
YEARS = [str(y) for y in range(1901, 1990, 8)]
JOBS = ["baker", "doctor", "sailor", "painter", "teacher", "farmer", "tailor", "lawyer"]
FACTS = {  # fact: (sentence, question, answer slot)
    "city": ("{name} was born in {city}.", "Where was {name} born?", "city"),
    "year": ("{name} was born in {year}.", "When was {name} born?", "year"),
    "job": ("{name} worked as a {job}.", "What did {name} work as?", "job"),
}
FILLER = ["The weather was mild.", "It rained a lot that year.", "Nobody knows more.",
          "The house was old.", "Friends came to visit.", "The town had a bridge."]
MAX_SEQ_LENGTH = 40


def _paragraph(rng, index, impossible):
    """One fact among two filler sentences, and a question on it; or (v2.0, `impossible`) a
    question on a fact the paragraph does not state."""
    values = {"name": rng.choice(NAMES), "city": rng.choice(CITIES), "year": rng.choice(YEARS),
              "job": rng.choice(JOBS)}
    fact = rng.choice(list(FACTS))
    sentences = [FACTS[fact][0].format(**values)] + rng.sample(FILLER, 2)
    rng.shuffle(sentences)
    context = " ".join(sentences)
    asked = rng.choice([f for f in FACTS if f != fact]) if impossible else fact
    qa = {"id": f"p{index}", "question": FACTS[asked][1].format(**values), "answers": [],
          "is_impossible": bool(impossible)}
    if not impossible:
        answer, sentence = values[FACTS[fact][2]], FACTS[fact][0].format(**values)
        offset = context.index(sentence) + sentence.index(answer)
        qa["answers"] = [{"text": answer, "answer_start": offset}]
    return {"context": context, "qas": [qa]}


def _write_squad(path, num_paragraphs, seed, v2=False):
    rng = random.Random(seed)
    paragraphs = [_paragraph(rng, i, v2 and rng.random() < 0.3) for i in range(num_paragraphs)]
    path.write_text(json.dumps({"version": "v2.0" if v2 else "1.1",
                                "data": [{"title": "people", "paragraphs": paragraphs}]}))
    return str(path)


def _span_text(example, features, row: int, start: int, end: int, tokenizer) -> str:
    """The answer text of window tokens [start, end], mapped back onto the context's words."""
    tokens = tokenizer.convert_ids_to_tokens(features.input_ids[row, start:end + 1].tolist())
    first, last = features.token_to_orig[row, start], features.token_to_orig[row, end]
    return squad_postprocess.final_text(squad_postprocess.detokenize(tokens),
                                        " ".join(example.doc_tokens[first:last + 1]), True)


def _original_nbest(trained, checkpoint: str, n_best_size: int, max_answer_length: int = 30
                    ) -> dict[str, list[tuple[str, float, float]]]:
    """google-research/bert's v1.1 n-best lists, written out as its loops over the logits of
    `checkpoint` on the predict file: each window's n best start and end positions; spans in
    the context, starting in their max-context window, 1 to max_answer_length tokens; best
    score first; the first n distinct texts. {question: [(text, start_logit, end_logit)]}."""
    prepared = squad_task.prepare(trained["options"], trained["run_config"])
    cached = prepared.predict_records()
    start_logits, end_logits = squad_task.predict_logits(
        prepared.loop_task, trained["run_config"], None, cached, MAX_SEQ_LENGTH, checkpoint)
    features = squad_records.load_metadata(cached)
    examples, _ = squad.read_squad_examples(trained["options"].predict_file, False, False)
    spans: dict[int, list[tuple[float, int, int, int]]] = {}
    for row, index in enumerate(features.example_index):
        # The n highest logits of the window, ties in position order (a stable sort).
        top_starts = np.argsort(-start_logits[row], kind="stable")[:n_best_size]
        top_ends = np.argsort(-end_logits[row], kind="stable")[:n_best_size]
        for start in top_starts:
            for end in top_ends:
                if (features.token_to_orig[row, start] < 0 or features.token_to_orig[row, end] < 0
                        or not features.token_is_max_context[row, start] or end < start
                        or end - start + 1 > max_answer_length):
                    continue
                score = float(start_logits[row, start]) + float(end_logits[row, end])
                spans.setdefault(int(index), []).append((score, row, start, end))
    nbest = {}
    for index, example in enumerate(examples):
        entries, seen = [], set()
        for _, row, start, end in sorted(spans[index], key=lambda span: -span[0]):
            text = _span_text(example, features, row, start, end, prepared.tokenizer)
            if text not in seen and len(entries) < n_best_size:
                seen.add(text)
                entries.append((text, float(start_logits[row, start]),
                                float(end_logits[row, end])))
        nbest[example.qas_id] = entries
    return nbest


def _check_nbest(nbest: dict, expected: dict[str, list[tuple[str, float, float]]]) -> None:
    """The written n-best lists are the original's: the same answers in the same order, their
    logits, and probabilities the softmax of start_logit + end_logit over the list."""
    assert set(nbest) == set(expected)
    for question, entries in nbest.items():
        want = expected[question]
        assert [e["text"] for e in entries] == [text for text, _, _ in want], question
        got = np.array([[e["start_logit"], e["end_logit"]] for e in entries])
        np.testing.assert_allclose(got, np.array([logits for _, *logits in want]), atol=1e-5)
        np.testing.assert_allclose([e["probability"] for e in entries],
                                   numpy_reference.softmax(got.sum(1)), rtol=1e-6)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("squad")
    templates = [s.replace("{", " ").replace("}", " ") for f in FACTS.values() for s in f[:2]]
    vocab, config_file = write_tiny_model(
        root, words_of(NAMES + CITIES + YEARS + JOBS + FILLER + templates),
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    train_file = root / "train.json"
    _write_squad(train_file, 320, seed=1)
    # One answer whose offset is wrong: skipped with a warning, counted in the summary.
    data = json.loads(train_file.read_text())
    answer = data["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]
    answer["text"] = "z" * len(answer["text"])
    train_file.write_text(json.dumps(data))
    predict_file = _write_squad(root / "dev.json", 30, seed=2)
    options = squad_task.SquadOptions(
        bert_config_file=config_file, vocab_file=vocab, train_file=str(train_file),
        predict_file=predict_file, do_train=True, do_predict=True, num_train_epochs=3.0,
        max_seq_length=MAX_SEQ_LENGTH, doc_stride=16, max_query_length=12, eval_every_epoch=True)
    run_config = training.RunConfig(output_dir=str(root / "out"), train_batch_size=16,
                                    learning_rate=3e-3, log_every_n_steps=1000)
    results = squad_task.run_squad(options, run_config)
    return {"root": root, "options": options, "run_config": run_config, "results": results}


@pytest.fixture(scope="module", autouse=True)
def script_run(trained, script_runner):
    """run_squad.py predicting with the trained checkpoint, started as soon as it exists: the
    in-process tests run meanwhile, `test_script_predict_only` (last) checks it."""
    options, out_dir = trained["options"], trained["root"] / "script"
    run = ScriptRun(script_runner, "run_squad.py", [
        f"--bert_config_file={options.bert_config_file}", f"--vocab_file={options.vocab_file}",
        f"--predict_file={options.predict_file}", "--do_predict", f"--output_dir={out_dir}",
        f"--max_seq_length={MAX_SEQ_LENGTH}", "--doc_stride=16", "--max_query_length=12",
        "--n_best_size=3", f"--init_checkpoint={trained['run_config'].output_dir}"])
    yield run, out_dir
    run.stop()


def test_learns_the_templated_questions_and_writes_the_outputs(trained):
    results, out_dir = trained["results"], trained["run_config"].output_dir
    counts = results["train_counts"]
    assert (counts["questions"], counts["skipped_answer_mismatch"]) == (320, 1)
    assert results["train"]["global_step"] == int(319 / 16 * 3.0)
    # A random span of the ~20-token context is right about once in 200 tries.
    assert results["eval"]["exact_match"] > 60.0 and results["eval"]["f1"] > 60.0
    predictions = json.load(open(os.path.join(out_dir, "predictions.json")))
    nbest = json.load(open(os.path.join(out_dir, "nbest_predictions.json")))
    assert len(predictions) == 30
    checkpoint = best_checkpoint.prediction_checkpoint(out_dir, "best")
    expected = _original_nbest(trained, checkpoint, n_best_size=20)  # the flag's default
    _check_nbest(nbest, expected)
    assert {q: entries[0]["text"] for q, entries in nbest.items()} == predictions
    assert max(len(entries) for entries in nbest.values()) == 20  # lists cut at n_best_size
    # Answers come back in the context's own casing ("Paris", not "paris").
    dev = json.load(open(trained["options"].predict_file))
    gold = {qa["id"]: qa["answers"][0]["text"]
            for p in dev["data"][0]["paragraphs"] for qa in p["qas"]}
    assert sum(predictions[q] == gold[q] for q in gold) / len(gold) == pytest.approx(
        results["eval"]["exact_match"] / 100)
    lines = open(os.path.join(out_dir, "eval_results.txt")).read().splitlines()
    assert [line.split(" = ")[0] for line in lines] == ["exact_match", "f1"]
    written = json.load(open(os.path.join(out_dir, "eval_results.json")))
    assert written == pytest.approx(results["eval"])
    assert not os.path.exists(os.path.join(out_dir, "null_odds.json"))


def test_evaluates_every_epoch_and_predicts_from_the_best(trained):
    out_dir = trained["run_config"].output_dir
    state = json.load(open(os.path.join(out_dir, "best_state.json")))
    # 319 questions / 16 = 19 steps an epoch: evaluated at 19, 38, 57 and the last step 59.
    assert state["metric"] == "f1" and state["last_step"] == 59
    best = {line.split(" = ")[0]: float(line.split(" = ")[1]) for line in
            open(os.path.join(out_dir, "best", "eval_results.txt"))}
    assert state["best_step"] in (19, 38, 57, 59) and best["f1"] == state["best_score"]
    # --predict_from=best (the default): the predict file's figures are best/'s.
    assert trained["results"]["eval"]["f1"] == pytest.approx(best["f1"])
    assert trained["results"]["eval"]["exact_match"] == pytest.approx(best["exact_match"])


def test_training_leaves_the_unused_pooler_as_initialised(trained):
    run_config = trained["run_config"]
    config = BertConfig.from_json_file(trained["options"].bert_config_file)
    keras.utils.set_random_seed(run_config.seed)  # as the loop does before it builds the model
    initial = models.span_model(config)
    model = training.load_model(squad_task.SpanTask(config), run_config)
    # The span head never reads the pooled output: no gradient, hence no update, no weight decay.
    for before, after in zip(initial.encoder.pooler.weights, model.encoder.pooler.weights):
        np.testing.assert_array_equal(after.numpy(), before.numpy(), err_msg=after.path)
    assert not np.allclose(model.encoder.embedding_table.numpy(),
                           initial.encoder.embedding_table.numpy())


@pytest.fixture(scope="module")
def v2_run(trained):
    """Predictions on a v2.0 file with the `auto` threshold, and the raw-text export."""
    predict_file = _write_squad(trained["root"] / "dev-v2.json", 20, seed=3, v2=True)
    out_dir = str(trained["root"] / "v2")
    options = dataclasses.replace(trained["options"], train_file=None, do_train=False,
                                  predict_file=predict_file, null_score_diff_threshold="auto",
                                  version_2_with_negative=True,
                                  export_dir=str(trained["root"] / "v2_export"))
    run_config = trained["run_config"].replace(output_dir=out_dir,
                                               init_checkpoint=trained["run_config"].output_dir)
    return predict_file, out_dir, squad_task.run_squad(options, run_config)


def test_v2_predictions_null_odds_and_auto_threshold(v2_run):
    predict_file, out_dir, results = v2_run
    evaluation = results["eval"]
    null_odds = json.load(open(os.path.join(out_dir, "null_odds.json")))
    predictions = json.load(open(os.path.join(out_dir, "predictions.json")))
    nbest = json.load(open(os.path.join(out_dir, "nbest_predictions.json")))
    # auto: the official search over null_odds with every question given its best non-null answer.
    best_non_null = {q: next(e["text"] for e in entries if e["text"])
                     for q, entries in nbest.items()}
    dataset = json.load(open(predict_file))["data"]
    threshold = evaluation["null_score_diff_threshold"]
    searched = squad_metrics.evaluate_v2(dataset, best_non_null, null_odds)
    assert threshold == searched["best_f1_thresh"]
    assert all((predictions[q] == "") == (null_odds[q] > threshold) for q in predictions)
    assert (evaluation["HasAns_total"] + evaluation["NoAns_total"] == evaluation["total"]
            == len(predictions))
    written = json.load(open(os.path.join(out_dir, "eval_results.json")))
    assert set(written) >= {"best_exact", "NoAns_f1"}


def test_exports_reproduce_predictions_from_raw_text(trained, v2_run):
    """v1.1: an export alone (the latest checkpoint of the run); v2.0: exported with the
    threshold `auto` chose. A process without bert_tf answers the predict files' questions as
    predictions.json does."""
    v1_export = str(trained["root"] / "v1_export")
    export_only = dataclasses.replace(trained["options"], do_train=False, do_predict=False,
                                      export_dir=v1_export)
    assert squad_task.run_squad(export_only, trained["run_config"])["export_dir"] == v1_export
    v2_file, v2_dir, v2_results = v2_run
    runs = [(trained["options"].predict_file, trained["run_config"].output_dir, v1_export),
            (v2_file, v2_dir, v2_results["export_dir"])]
    jobs = []
    for predict_file, _, export_dir in runs:
        assert ops.unservable_ops(export_dir) == []
        qas = [(qa["question"], p["context"]) for p in json.load(open(predict_file))["data"][0][
            "paragraphs"] for qa in p["qas"]]
        jobs.append({"export_dir": export_dir, "signature": "serving_default",
                     "inputs": {"question": [q for q, _ in qas], "context": [c for _, c in qas]}})
    # The v1.1 checkpoint in bfloat16 (--export_dtype), on the same questions.
    bf16_export = str(trained["root"] / "v1_export_bf16")
    squad_task.run_squad(dataclasses.replace(export_only, export_dir=bf16_export,
                                             export_dtype="bfloat16"), trained["run_config"])
    assert ops.unservable_ops(bf16_export) == ops.bfloat16_ops_without_cpu_kernel(bf16_export) == []
    jobs.append({**jobs[0], "export_dir": bf16_export})
    # Contexts without pieces only: no window in the whole batch, still one answer each.
    jobs.append({"export_dir": v2_results["export_dir"], "signature": "serving_default",
                 "inputs": {"question": ["Who?", ""], "context": ["", " \t\u202f"]}})
    *outputs, bf16, no_windows = run_client(trained["root"], jobs)
    # bfloat16: the float32 export's answers, the scores within a few of bfloat16's 2⁻⁸ steps.
    assert bf16["answer"] == outputs[0]["answer"]
    scale = np.abs(outputs[0]["score"]).max()
    np.testing.assert_allclose(bf16["score"], outputs[0]["score"], atol=0.02 * scale)
    assert (no_windows["answer"], no_windows["answer_start"], no_windows["has_answer"]) == \
        (["", ""], [-1, -1], [False, False])
    for (predict_file, out_dir, _), got in zip(runs, outputs):
        ids = [qa["id"] for p in json.load(open(predict_file))["data"][0]["paragraphs"]
               for qa in p["qas"]]
        predictions = json.load(open(os.path.join(out_dir, "predictions.json")))
        assert got["answer"] == [predictions[q] for q in ids]
        assert got["has_answer"] == [predictions[q] != "" for q in ids]
    null_odds = json.load(open(os.path.join(v2_dir, "null_odds.json")))
    np.testing.assert_allclose(outputs[1]["null_odds"], [null_odds[q] for q in ids], atol=1e-4)
    assert "null_odds" not in outputs[0]


def test_openvino_int8_export_answers_as_float32(trained, tmp_path):
    """--export_runtime=openvino --export_dtype=int8, calibrated on 64 training questions: its
    float32 F1 is the run's own on the predict file, int8 keeps it, bert-predict answers as
    predictions.json; past a known threshold the export is refused with the figures."""
    require_extra("openvino", "openvino")
    int8_export = str(trained["root"] / "openvino_int8")
    export_only = dataclasses.replace(trained["options"], do_train=False, do_predict=False,
                                      export_runtime="openvino", export_dtype="int8",
                                      int8_calibration_examples=64, export_dir=int8_export)
    squad_task.run_squad(export_only, trained["run_config"])
    with open(os.path.join(int8_export, openvino.MANIFEST), encoding="utf-8") as f:
        dev = json.load(f)["dev"]
    run_f1 = trained["results"]["eval"]["f1"]
    assert (dev["metric"], dev["examples"]) == ("f1", 30) and dev["float32"] == run_f1 > 80
    assert openvino.relative_loss(dev["float32"], dev["int8"]) <= 0.01
    with open(os.path.join(int8_export, "model.xml"), encoding="utf-8") as f:
        assert f.read().count('type="FakeQuantize"') >= 6
    qas = [(qa["id"], qa["question"], p["context"]) for p in json.load(open(
        trained["options"].predict_file))["data"][0]["paragraphs"] for qa in p["qas"]]
    tsv = tmp_path / "questions.tsv"
    tsv.write_text("question\tcontext\n" + "".join(f"{q}\t{c}\n" for _, q, c in qas))
    out, progress = io.StringIO(), io.StringIO()
    predict.predict_file(int8_export, str(tsv), out, progress=progress)
    assert progress.getvalue().splitlines()[0] == f"{int8_export}: int8 weights and compute"
    got = [json.loads(line) for line in out.getvalue().splitlines()]
    predictions = json.load(open(os.path.join(trained["run_config"].output_dir,
                                              "predictions.json")))
    same = np.mean([r["answer"] == predictions[qid] for r, (qid, _, _) in zip(got, qas)])
    assert len(got) == 30 and same >= dev["answers_unchanged"] >= 0.9
    # A batch without any window: the model reads one row of padding, the answers are empty.
    _, serve, _ = predict.load_signature(int8_export, "serving_default")
    empty = serve(question=tf.constant(["Who?", ""]), context=tf.constant(["", " \t"]))
    assert (empty["answer"].tolist(), empty["answer_start"].tolist()) == ([b"", b""], [-1, -1])
    # OpenVINO float32 answers as TensorFlow: no loss; refused when not even that is allowed.
    with pytest.raises(UserError) as refused:
        squad_task.run_squad(dataclasses.replace(
            export_only, export_dtype="float32", export_max_relative_loss=-0.001,
            export_dir=str(tmp_path / "refused")), trained["run_config"])
    assert str(refused.value) == (
        f"the float32 export loses more than --export_max_relative_loss=-0.001: dev f1 float32 "
        f"{run_f1:.4f}, float32 {run_f1:.4f} (+0.00% relative), 100.0% of answers unchanged; "
        "not written (raise the flag, or give more --int8_calibration_examples)")
    assert not os.path.exists(tmp_path / "refused")


def test_threshold_flag_values():
    assert squad_task.parse_threshold("AUTO") == "auto"
    assert squad_task.parse_threshold("-1.5") == -1.5
    with pytest.raises(ValueError, match="number or auto, got 'maybe'"):
        squad_task.parse_threshold("maybe")


def test_option_errors(trained):
    options = trained["options"]
    run_config = trained["run_config"]
    bad = [
        (dict(do_train=False, do_predict=False), "nothing to do"),
        (dict(do_train=False, do_predict=False, version_2_with_negative=True,
              null_score_diff_threshold="auto", export_dir=str(trained["root"] / "no")),
         "no threshold chosen yet"),
        (dict(train_file=None), "--do_train needs --train_file"),
        (dict(max_seq_length=15), "must be greater than --max_query_length"),
        (dict(max_seq_length=128), "max_position_embeddings=64"),
        (dict(null_score_diff_threshold="auto"), "auto needs --version_2_with_negative"),
    ]
    for change, message in bad:
        with pytest.raises(ValueError, match=message):
            squad_task.run_squad(dataclasses.replace(options, **change), run_config)


def test_script_predict_only(trained, script_run):
    run, out_dir = script_run
    output = run.wait()
    assert f"exact_match = {trained['results']['eval']['exact_match']}" in output
    assert "predict: 30 questions (0 impossible), 30 windows" in output  # the run summary
    nbest = json.load(open(out_dir / "nbest_predictions.json"))
    checkpoint = tf.train.latest_checkpoint(trained["run_config"].output_dir)  # --init_checkpoint
    _check_nbest(nbest, _original_nbest(trained, checkpoint, n_best_size=3))
