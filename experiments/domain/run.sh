#!/usr/bin/env bash
# The paper's domain experiment (Peters et al. 2018, section 5) with the packaged biLM (issue 13):
# fine-tune mini_en on the MR training sentences' text, against a biLM trained from scratch on the
# same text for the same steps (same vocabulary: mini_en's), and compare held-out MR perplexity.
#
#   experiments/domain/run.sh [OUT]        (default runs/domain; STEPS=600 by default)
#
# Then the downstream rows with the fine-tuned biLM:
#   python experiments/downstream.py --bilm-dir OUT/finetuned --variants elmo glove+elmo \
#       --output-dir experiments/results/domain
set -euo pipefail
OUT=${1:-runs/domain}
STEPS=${STEPS:-600}
BIN=${BIN:-.venv/bin}
MINI=elmo_keras/assets/mini_en
"$BIN/python" experiments/domain/mr_text.py "$OUT"
# Both runs train with the `cpu` configuration's settings (batch 32 x 20, 2,048 sampled
# candidates, Adam 0.002) on the packaged biLM's architecture.
"$BIN/python" - "$MINI/options.json" "$OUT/config.json" <<'PY'
import json
import sys

from elmo_keras.training.configs import get_config

config = get_config("cpu")
options = json.load(open(sys.argv[1], encoding="utf-8"))
config.update(lstm=options["lstm"], char_cnn=options["char_cnn"])
json.dump(config, open(sys.argv[2], "w", encoding="utf-8"), indent=1)
PY
evaluate() { "$BIN/elmo-keras" evaluate --model "$1" --data "$OUT/mr_heldout.txt" --batch-size 16; }
echo "== mini_en before fine-tuning"; evaluate "$MINI" | tee "$OUT/heldout_mini_en.txt"
for run in finetuned scratch; do
  if [ -f "$OUT/$run/lm_weights.hdf5" ]; then continue; fi
  if [ "$run" = finetuned ]; then
    FROM=(--init-from mini_en)
  else
    FROM=(--vocab "$MINI/vocab.txt")
  fi
  "$BIN/elmo-keras" train "${FROM[@]}" --config "$OUT/config.json" --train "$OUT/mr_train.txt" \
    --steps "$STEPS" --seed 0 --checkpoint-every 200 --log-every 100 --output "$OUT/$run" \
    --shuffle-buffer 10000  # the data order of the recorded results (the stream before 2026-11-27)
done
for run in finetuned scratch; do
  echo "== $run"; evaluate "$OUT/$run" | tee "$OUT/heldout_$run.txt"
done
