#!/usr/bin/env bash
# Trains mini_en v1 (issue 15; packaged until issue 31 replaced it with v2, experiments/mini_en_v2/)
# and evaluates it; resumable.
#
#   experiments/mini_en/train.sh [RUN_DIR] 2>&1 | tee -a RUN_DIR/train_log.txt   (default runs/mini_en)
#
# Run it again after an interruption: it resumes from the last checkpoint and the result is the
# same model (the step, the data order and the sampler all come from the checkpoint). When the
# run has reached STEPS it evaluates on WikiText-2 test and writes RUN_DIR/test.txt; then
# `python experiments/mini_en/package.py RUN_DIR --log ... --output DIR` writes its folder and card.
set -euo pipefail
RUN=${1:-runs/mini_en}
WT2=${WT2:-../shared/data/wikitext-2}
STEPS=${STEPS:-11673}  # where the shipped model stopped (SIGINT at step 11,673 of a 30,000 plan; constant learning rate, so the plan length does not change the steps before it)
BIN=${BIN:-.venv/bin}
if [ -f "$RUN/training_config.json" ]; then RESUME=--resume; else RESUME=; fi
"$BIN/elmo-keras" train $RESUME --config cpu --train "$WT2/train.raw.txt" \
  --valid "$WT2/valid.raw.txt" --min-count 3 --steps "$STEPS" --seed 0 \
  --checkpoint-every 500 --log-every 100 --output "$RUN" \
  --shuffle-buffer 10000  # v1's data order: the trainer's stream before 2026-11-27
"$BIN/elmo-keras" evaluate --model "$RUN" --data "$WT2/test.raw.txt" --batch-size 16 \
  | tee "$RUN/test.txt"
