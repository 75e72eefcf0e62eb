#!/bin/bash
# mini_en v2, stage 2: continue the GPU candidate on this machine's CPUs, in the background,
# resumable. The first call starts from the stage-1 model folder; later calls resume the run
# from its newest checkpoint (the same settings; LR=0.0003 lowers the learning rate from there on,
# recorded in the run's settings). Stops (and checkpoints) after T seconds. A new run streams
# through the 10,000-line buffer stage 2 used (SHUFFLE_BUFFER=0: the whole text, the trainer's
# default since 2026-11-27).
#   RUN=/work/cpu_v2/run FROM=/work/v2run TRAIN=/work/corpus_build/train.txt T=7200 \
#     nohup bash experiments/mini_en_v2/cpu_continue.sh > /work/cpu_v2/log.txt 2>&1 &
set -u
T=${T:-7200}; RUN=${RUN:?the run folder}; ELMO=${ELMO:-.venv/bin/elmo-keras}
if [ -d "$RUN/checkpoints" ]; then
  LOWER=()
  if [ -n "${LR:-}" ]; then LOWER=(--override --learning-rate "$LR"); fi
  exec nice -n 10 $ELMO train --resume --output "$RUN" --time-budget "$T" "${LOWER[@]}"
fi
exec nice -n 10 $ELMO train --backend tensorflow --init-from "${FROM:?the stage-1 model folder}" \
  --train "${TRAIN:?the corpus train.txt}" --batch-size 64 --learning-rate 0.001 --seed 1 \
  --checkpoint-every 300 --keep-checkpoints 2 --log-every 50 --time-budget "$T" --output "$RUN" \
  --shuffle-buffer "${SHUFFLE_BUFFER:-10000}"
