#!/usr/bin/env bash
# The main job, end to end on the bundled data (no downloads); everything is written under
# demo_output/. Steps: build a vocabulary -> create pretraining records -> pretrain a tiny model
# (and a tiny ALBERT, a tiny ELECTRA) -> extract features -> fine-tune it on classification, SQuAD-format QA and NER
# -> distil the classifier into a smaller student.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${DEMO_OUTPUT:-demo_output}
DATA=demo/data
rm -rf "$OUT" && mkdir -p "$OUT"
export TF_CPP_MIN_LOG_LEVEL=2
step() { printf '\n=== %s\n' "$*"; }

step "1. Build a WordPiece vocabulary from the bundled corpus"
python build_vocab.py --input_file="$DATA/corpus.txt" --output_file="$OUT/vocab.txt" \
  --vocab_size=3000 --num_unused=20

# A tiny model whose vocabulary size is the one just built.
python - "$OUT" <<'PY'
import sys
from bert_tf.model.config import BertConfig
out = sys.argv[1]
vocab_size = sum(1 for _ in open(f"{out}/vocab.txt", encoding="utf-8"))
BertConfig(vocab_size=vocab_size, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
           intermediate_size=256, max_position_embeddings=128, type_vocab_size=2,
           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
           ).to_json_file(f"{out}/bert_config.json")
print(f"wrote {out}/bert_config.json (vocab_size={vocab_size})")
PY

step "2. Create masked-LM / next-sentence records"
python create_pretraining_data.py --input_file="$DATA/corpus.txt" \
  --output_file="$OUT/pretrain-0.tfrecord,$OUT/pretrain-1.tfrecord" --vocab_file="$OUT/vocab.txt" \
  --max_seq_length=64 --max_predictions_per_seq=10 --dupe_factor=2 --num_workers=2

step "3. Pretrain the tiny model"
python run_pretraining.py --input_file="$OUT/pretrain-*.tfrecord" --output_dir="$OUT/pretraining" \
  --bert_config_file="$OUT/bert_config.json" --do_train --do_eval \
  --max_seq_length=64 --max_predictions_per_seq=10 --train_batch_size=32 --eval_batch_size=32 \
  --learning_rate=5e-4 --num_train_steps=800 --num_warmup_steps=80 --save_checkpoints_steps=400 \
  --iterations_per_loop=100 --log_every_n_steps=100 --max_eval_steps=20 --export_google_checkpoint

step "3b. ALBERT: sentence-order records, a tiny shared-layer model pretrained with LAMB"
python - "$OUT" <<'PY'
import sys
from bert_tf.checkpoints.model_config import load_model_config
from bert_tf.model.albert.config import AlbertConfig
out = sys.argv[1]
bert = load_model_config(f"{out}/bert_config.json")
AlbertConfig(vocab_size=bert.vocab_size, embedding_size=32, hidden_size=128, num_hidden_layers=4,
             num_hidden_groups=1, num_attention_heads=4, intermediate_size=256,
             max_position_embeddings=128, type_vocab_size=2, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0).to_json_file(f"{out}/albert_config.json")
print(f"wrote {out}/albert_config.json (4 layers sharing one block)")
PY
head -n 1500 "$DATA/corpus.txt" > "$OUT/albert_corpus.txt"
python create_pretraining_data.py --input_file="$OUT/albert_corpus.txt" \
  --output_file="$OUT/albert-sop.tfrecord" --vocab_file="$OUT/vocab.txt" --sentence_order \
  --max_seq_length=64 --max_predictions_per_seq=10 --dupe_factor=1 --num_workers=1
python run_pretraining.py --input_file="$OUT/albert-sop.tfrecord" --output_dir="$OUT/albert" \
  --albert_config_file="$OUT/albert_config.json" --optimizer=lamb --learning_rate=0.05 \
  --do_train --do_eval --max_seq_length=64 --max_predictions_per_seq=10 --train_batch_size=16 \
  --eval_batch_size=32 --num_train_steps=30 --num_warmup_steps=3 --max_eval_steps=2 \
  --log_every_n_steps=20 --export_google_checkpoint
cat "$OUT/albert/eval_results.txt"

step "3c. ELECTRA: a tiny generator/discriminator pair pretrained by replaced-token detection, fine-tuned and served"
python - "$OUT" <<'PY'
import sys
from bert_tf.checkpoints.model_config import load_model_config
from bert_tf.model.electra.config import ElectraConfig
out = sys.argv[1]
bert = load_model_config(f"{out}/bert_config.json")
ElectraConfig(vocab_size=bert.vocab_size, embedding_size=64, hidden_size=128, num_hidden_layers=2,
              num_attention_heads=4, intermediate_size=256, max_position_embeddings=128,
              type_vocab_size=2).to_json_file(f"{out}/electra_config.json")
print(f"wrote {out}/electra_config.json (embedding_size 64 projected to hidden 128)")
PY
python create_pretraining_data.py --input_file="$DATA/corpus.txt" \
  --output_file="$OUT/electra-unmasked.tfrecord" --vocab_file="$OUT/vocab.txt" --dynamic_masking \
  --max_seq_length=64 --max_predictions_per_seq=10 --dupe_factor=1 --num_workers=1
python run_pretraining.py --objective=electra --input_file="$OUT/electra-unmasked.tfrecord" \
  --output_dir="$OUT/electra" --electra_config_file="$OUT/electra_config.json" \
  --generator_hidden_size=0.25 --disc_weight=50 --do_train --do_eval --max_seq_length=64 \
  --max_predictions_per_seq=10 --train_batch_size=32 --eval_batch_size=32 --learning_rate=5e-4 \
  --num_train_steps=300 --num_warmup_steps=30 --log_every_n_steps=100 --max_eval_steps=5 \
  --export_google_checkpoint
cat "$OUT/electra/eval_results.txt"
python run_classifier.py --task_name=sst-2 --data_dir="$DATA/classification" \
  --vocab_file="$OUT/vocab.txt" --init_checkpoint="$OUT/electra/google_checkpoint/bert_model.ckpt" \
  --electra_config_file="$OUT/electra_config.json" --output_dir="$OUT/electra_classifier" \
  --export_dir="$OUT/electra_classifier_savedmodel" --do_train --do_eval --train_batch_size=32 \
  --num_train_epochs=4 --max_seq_length=64 --learning_rate=2e-4 --log_every_n_steps=50
cat "$OUT/electra_classifier/eval_results.txt"
printf '%s\n' "the acting was excellent and the story was moving ." > "$OUT/electra_raw.txt"
python predict.py --export_dir="$OUT/electra_classifier_savedmodel" --input_file="$OUT/electra_raw.txt" \
  --output_file="$OUT/electra_raw_predictions.jsonl"
cat "$OUT/electra_raw_predictions.jsonl"

step "4. Extract features with the pretrained encoder"
head -n 20 "$DATA/corpus.txt" | grep -v '^$' > "$OUT/extract_input.txt"
python extract_features.py --input_file="$OUT/extract_input.txt" --output_file="$OUT/features.jsonl" \
  --vocab_file="$OUT/vocab.txt" --bert_config_file="$OUT/bert_config.json" \
  --init_checkpoint="$OUT/pretraining" --layers=-1,-2 --max_seq_length=64 \
  --export_dir="$OUT/features_savedmodel"
echo "wrote $(wc -l < "$OUT/features.jsonl") lines to $OUT/features.jsonl"

step "4b. Further pretraining within-task: the classifier's own training sentences, heads restored"
python create_pretraining_data.py --input_file="$DATA/classification/train.tsv" --input_format=tsv \
  --text_columns=sentence --output_file="$OUT/within_task.tfrecord" --vocab_file="$OUT/vocab.txt" \
  --max_seq_length=64 --max_predictions_per_seq=10 --dupe_factor=2
python run_pretraining.py --input_file="$OUT/within_task.tfrecord" --output_dir="$OUT/further_pretraining" \
  --init_checkpoint="$OUT/pretraining/google_checkpoint" --do_train --max_seq_length=64 \
  --max_predictions_per_seq=10 --train_batch_size=32 --learning_rate=5e-5 --num_train_steps=20 \
  --num_warmup_steps=2 --log_every_n_steps=10

COMMON=(--vocab_file="$OUT/vocab.txt" --bert_config_file="$OUT/bert_config.json"
        --init_checkpoint="$OUT/pretraining"
        --save_checkpoints_steps=1000 --iterations_per_loop=100 --log_every_n_steps=50)

step "5. Fine-tune a sentence classifier (SST-2 layout) and export it for serving"
python run_classifier.py --task_name=sst-2 --data_dir="$DATA/classification" \
  --output_dir="$OUT/classifier" --export_dir="$OUT/classifier_savedmodel" \
  --do_train --do_eval --do_predict --train_batch_size=32 --num_train_epochs=4 --max_seq_length=64 \
  --learning_rate=2e-4 "${COMMON[@]}"
cat "$OUT/classifier/eval_results.txt"

step "6. Fine-tune SQuAD-style span extraction (v2.0, with unanswerable questions)"
python run_squad.py --train_file="$DATA/squad/train-v2.0.json" --predict_file="$DATA/squad/dev-v2.0.json" \
  --version_2_with_negative --null_score_diff_threshold=auto --output_dir="$OUT/squad" \
  --export_dir="$OUT/squad_savedmodel" --do_train --do_predict --train_batch_size=32 --num_train_epochs=5 --max_seq_length=128 \
  --doc_stride=64 --max_query_length=32 --learning_rate=5e-4 "${COMMON[@]}"

step "7. Fine-tune a named-entity tagger (CoNLL format)"
python run_ner.py --data_dir="$DATA/ner" --output_dir="$OUT/ner" --do_train --do_eval --do_predict \
  --export_dir="$OUT/ner_savedmodel" \
  --train_batch_size=32 --num_train_epochs=6 --max_seq_length=64 --learning_rate=5e-4 "${COMMON[@]}"
cat "$OUT/ner/eval_results.txt"

step "8. Serve raw text: each export on a few sentences (tokenizer inside the SavedModel)"
printf '%s\n' "the acting was excellent and the story was moving ." \
  "the concert was simply awful ." "" > "$OUT/raw_sentences.txt"
python predict.py --export_dir="$OUT/classifier_savedmodel" --input_file="$OUT/raw_sentences.txt" \
  --output_file="$OUT/classifier_raw_predictions.jsonl"
cat "$OUT/classifier_raw_predictions.jsonl"
# The test file's first sentence, its words joined by spaces (the tags are what the model adds).
awk 'NF == 0 { if (s) exit; next } $1 != "-DOCSTART-" { s = s (s ? " " : "") $1 } END { print s }' \
  "$DATA/ner/test.txt" > "$OUT/raw_ner.txt"
python predict.py --export_dir="$OUT/ner_savedmodel" --input_file="$OUT/raw_ner.txt" \
  --output_file="$OUT/ner_raw_predictions.jsonl"
cat "$OUT/ner_raw_predictions.jsonl"
python predict.py --export_dir="$OUT/features_savedmodel" --input_file="$OUT/raw_sentences.txt" \
  --output_file="$OUT/features_raw.jsonl"
python -c "import json,sys; [print(r['tokens'][:r['length']], 'mean of', len(r['mean']), 'values') for r in map(json.loads, open(sys.argv[1]))]" "$OUT/features_raw.jsonl"
# Two questions on the dev set's first context, asked as a client would (JSON lines).
python -c "import json,sys; p = json.load(open(sys.argv[1]))['data'][0]['paragraphs'][0]; [print(json.dumps({'question': q['question'], 'context': p['context']})) for q in p['qas'][:2]]" \
  "$DATA/squad/dev-v2.0.json" > "$OUT/raw_questions.jsonl"
python predict.py --export_dir="$OUT/squad_savedmodel" --input_file="$OUT/raw_questions.jsonl" \
  --output_file="$OUT/squad_raw_predictions.jsonl"
cat "$OUT/squad_raw_predictions.jsonl"

step "9. The same tagger with a CRF (learned transitions, Viterbi), keeping the best dev checkpoint"
python run_ner.py --data_dir="$DATA/ner" --output_dir="$OUT/ner_crf" --do_train --do_predict \
  --crf --crf_learning_rate=5e-3 --eval_every_epoch --best_metric=eval_f1 \
  --early_stopping_patience=2 --train_batch_size=32 --num_train_epochs=6 --max_seq_length=64 \
  --learning_rate=5e-4 "${COMMON[@]}"
cat "$OUT/ner_crf/best/eval_results.txt"
head -n 12 "$OUT/ner_crf/test_predictions.txt"

step "10. Distil the classifier into a narrower 2-layer student (TinyBERT's two stages) and serve it"
python - "$OUT" <<'PY'
import dataclasses, sys
from bert_tf.model.config import BertConfig
out = sys.argv[1]
teacher = BertConfig.from_json_file(f"{out}/bert_config.json")
dataclasses.replace(teacher, hidden_size=64, intermediate_size=128).to_json_file(
    f"{out}/student_config.json")
print(f"wrote {out}/student_config.json (2 layers, hidden 64: half the teacher's width)")
PY
python run_distillation.py --task=classifier --task_name=sst-2 --data_dir="$DATA/classification" \
  --vocab_file="$OUT/vocab.txt" --teacher_dir="$OUT/classifier" \
  --student_config="$OUT/student_config.json" --stages=intermediate,prediction \
  --intermediate_epochs=4 --intermediate_learning_rate=1e-3 --num_train_epochs=4 \
  --learning_rate=5e-4 --train_batch_size=32 --max_seq_length=64 --do_eval \
  --output_dir="$OUT/classifier_student" --export_dir="$OUT/classifier_student_savedmodel" \
  --save_checkpoints_steps=1000 --iterations_per_loop=100 --log_every_n_steps=50
cat "$OUT/classifier_student/distillation_results.json"
python predict.py --export_dir="$OUT/classifier_student_savedmodel" \
  --input_file="$OUT/raw_sentences.txt" --output_file="$OUT/student_raw_predictions.jsonl"
cat "$OUT/student_raw_predictions.jsonl"

step "Done: outputs are under $OUT/"
