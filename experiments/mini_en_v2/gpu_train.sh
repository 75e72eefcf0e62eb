#!/bin/bash
# mini_en v2 candidate: one time-boxed JAX training run on the GPU; returns the model folder in 15 MiB parts.
T=${T:-270}
[ -n "$SKIP_PIP" ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/keras-*.whl .whl/namex-*.whl .whl/optree-*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERAS_BACKEND=jax PYTHONUNBUFFERED=1
OUTDIR=${OUT:-/tmp/out}; mkdir -p $OUTDIR
nvidia-smi --query-gpu=name --format=csv,noheader > $OUTDIR/device.txt 2>&1
if [ -f .whl/v2/train.txt.gz ]; then gunzip -c .whl/v2/train.txt.gz > /tmp/train.txt; else cp ${TRAIN:-.whl/wikitext-2/valid.raw.txt} /tmp/train.txt; fi
wc -lw /tmp/train.txt | tee -a $OUTDIR/train_log.txt
RUN=/tmp/run_v2; rm -rf $RUN
timeout $((T + 110)) ${PY:-python3} -c "import sys; from elmo_keras.cli import main; sys.exit(main(sys.argv[1:]))" \
  train --backend jax --config .whl/v2/v2.json --train /tmp/train.txt --min-count 3 --max-vocab-size 40000 \
  --time-budget $T --tf32 --seed 0 --checkpoint-every 1000000 --log-every 250 --output $RUN --shuffle-buffer 10000 2>&1 | tee -a $OUTDIR/train_log.txt
ls -la $RUN | tee -a $OUTDIR/train_log.txt
tar -C $RUN -cf /tmp/model.tar options.json lm_weights.hdf5 vocab.txt softmax.hdf5 training_config.json 2>>$OUTDIR/train_log.txt
sha256sum /tmp/model.tar | tee $OUTDIR/model.tar.sha256
split -b 15M -d /tmp/model.tar $OUTDIR/model.tar.part
ls -la $OUTDIR
