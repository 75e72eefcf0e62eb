#!/usr/bin/env bash
# Checks a checkpoint of a mini_en v2 training run against the issue-31 bars, while the run goes
# on: the demo's sense table (LSTM 1 1-NN: bank, play, present at least 10 of 12) and the
# WikiText-2 test perplexity on the basis shared with mini_en v1 (below v1's on that basis).
#
#   experiments/mini_en_v2/check.sh RUN CHECKPOINT V1_FOLDER [OUT]     (e.g. ckpt-1200)
#
# V1_FOLDER: v1's model files (elmo_keras/assets/mini_en until v2 replaces it).
set -euo pipefail
RUN=$1; CKPT=$2; V1=$3; OUT=${4:-$RUN/checks}
BIN=${BIN:-.venv/bin}
WT2=${WT2:-../shared/data/wikitext-2}
mkdir -p "$OUT"
"$BIN/elmo-keras" snapshot --run "$RUN" --checkpoint "$CKPT" --output "$OUT/$CKPT" --overwrite
{
  "$BIN/elmo-keras" demo --model "$OUT/$CKPT" | grep -E "^  (bank|play|present|read) "
  "$BIN/elmo-keras" evaluate --model "$OUT/$CKPT" --data "$WT2/test.raw.txt" --batch-size 16 \
    --basis-vocab "$V1/vocab.txt"
} | tee "$OUT/$CKPT.txt"
