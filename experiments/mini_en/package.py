"""Packages a finished `mini_en` v1 run (experiments/mini_en/train.sh) as a preset folder.

    python experiments/mini_en/package.py runs/mini_en --log runs/mini_en/train_log.txt \
        --output runs/mini_en_v1

v1 was the packaged `mini_en` until issue 31 replaced it with v2 (experiments/mini_en_v2/); its
files stay in the repository's history (docs/embedding.md says how to load them), and this
script still rebuilds its folder and card, which `from_preset(folder)` loads.

Copies options.json, lm_weights.hdf5, vocab.txt and softmax.hdf5 into the folder `--output`
and writes MODEL_CARD.md there: the corpus files with their sizes and
sha256, the configuration, the steps, tokens and wall time read from the training log (the
`elmo-keras train` output of every invocation, resumed ones included), the machine, and the
perplexities: WikiText-2 validation (from the log), WikiText-2 test (`RUN/test.txt`, written by
train.sh) against the add-one unigram on the same test split (computed here).
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import shutil
import sys

from elmo_keras.file_io.download import file_sha256

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = ("options.json", "lm_weights.hdf5", "vocab.txt", "softmax.hdf5")
REFERENCE_43_MIN = 150.9  # docs/training.md: the 43-minute `cpu` run's WikiText-2 test perplexity


def parse_log(text):
    """Steps, tokens, seconds summed over invocations; the last validation perplexities."""
    runs = re.findall(r"trained (\d+) steps \((\w+)\), (\d+) tokens in (\d+) s", text)
    if not runs:
        raise ValueError("the training log has no 'trained N steps' line")
    valid = re.findall(
        r"valid perplexity: forward ([\d.]+), backward ([\d.]+), average ([\d.]+) \((\d+) tokens\)",
        text,
    )
    return {
        "invocations": len(runs),
        "steps": int(runs[-1][0]),
        "tokens": sum(int(r[2]) for r in runs),
        "seconds": sum(int(r[3]) for r in runs),
        "valid": [float(v) for v in valid[-1][:3]] + [int(valid[-1][3])] if valid else None,
        # (steps, average validation perplexity) at the end of each invocation that logged one
        "history": [(int(r[0]), float(v[2])) for r, v in zip(runs, valid, strict=False)],
    }


def parse_test(text):
    values = {
        key: float(value)
        for key, value in re.findall(r"(forward|backward|average) perplexity:\s+([\d.]+)", text)
    }
    tokens = int(re.search(r"tokens: (\d+)", text).group(1))
    return values["forward"], values["backward"], values["average"], tokens


def cpu_description():
    model, flags = platform.processor() or "unknown", []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info = f.read()
        model = re.search(r"model name\s*:\s*(.*)", info).group(1)
        present = set(re.search(r"flags\s*:\s*(.*)", info).group(1).split())
        flags = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if f in present]
    except (OSError, AttributeError):
        pass
    return f"{model}, {os.cpu_count()} cores, flags {' '.join(flags) or 'n/a'}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="the run folder of experiments/mini_en/train.sh")
    parser.add_argument("--log", required=True, help="the training output, every invocation")
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "wikitext-2"))
    parser.add_argument(
        "--output", required=True, help="the folder to write (v1 is no longer packaged)"
    )
    args = parser.parse_args(argv)
    run, data, output = pathlib.Path(args.run), pathlib.Path(args.data), pathlib.Path(args.output)
    for name in FILES + ("test.txt", "training_config.json"):
        if not (run / name).is_file():
            sys.exit(f"{run / name} not found: is the run finished (train.sh writes test.txt)?")

    log = parse_log(pathlib.Path(args.log).read_text(encoding="utf-8"))
    test = parse_test((run / "test.txt").read_text(encoding="utf-8"))
    settings = json.loads((run / "training_config.json").read_text(encoding="utf-8"))

    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.baselines import unigram_perplexity

    vocabulary = Vocabulary.load(run / "vocab.txt")
    unigram = unigram_perplexity(
        str(data / "train.raw.txt"), str(data / "test.raw.txt"), vocabulary
    )

    output.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copyfile(run / name, output / name)
    import h5py

    with h5py.File(output / "lm_weights.hdf5", "r") as f:
        n_lm = sum(d.size for d in _datasets(f))
    with h5py.File(output / "softmax.hdf5", "r") as f:
        n_softmax = sum(d.size for d in _datasets(f))
    card = render_card(settings, log, test, unigram, vocabulary, data, output, n_lm, n_softmax)
    (output / "MODEL_CARD.md").write_text(card, encoding="utf-8")
    print(card)


def _datasets(group):
    import h5py

    for item in group.values():
        if isinstance(item, h5py.Dataset):
            yield item
        else:
            yield from _datasets(item)


def render_card(settings, log, test, unigram, vocabulary, data, output, n_lm, n_softmax):
    config = settings["config"]
    lstm, cnn = config["lstm"], config["char_cnn"]
    corpus_rows = "\n".join(
        f"| `{name}` | {(data / name).stat().st_size:,} | `{file_sha256(data / name)}` |"
        for name in ("train.raw.txt", "valid.raw.txt", "test.raw.txt")
    )
    file_rows = "\n".join(
        f"| `{name}` | {(output / name).stat().st_size:,} | `{file_sha256(output / name)}` |"
        for name in FILES
    )
    hours = log["seconds"] / 3600
    valid = log["valid"]
    valid_line = (
        f"| WikiText-2 validation (all {valid[3]:,} tokens) | {valid[0]:.1f} | {valid[1]:.1f} | "
        f"**{valid[2]:.1f}** | |"
        if valid
        else ""
    )
    epochs = log["tokens"] / _count_tokens(data / "train.raw.txt")
    test_line = (
        f"| WikiText-2 test (all {test[3]:,} tokens) | {test[0]:.1f} | {test[1]:.1f} | "
        f"**{test[2]:.1f}** | {unigram:.1f} |"
    )
    model_table = _table(
        [
            (
                "character CNN",
                f"{cnn['embedding']['dim']}-d character embeddings, filters {cnn['filters']}, "
                f"{cnn['n_highway']} highway layer(s), projection to {lstm['projection_dim']}",
            ),
            (
                "biLSTM",
                f"{lstm['n_layers']} layers each way, {lstm['dim']} cells projected to "
                f"{lstm['projection_dim']}, cell and projection clip {lstm['cell_clip']}, "
                "residual from layer 2",
            ),
            (
                "ELMo output",
                f"{lstm['n_layers'] + 1} layers x {2 * lstm['projection_dim']} floats per token",
            ),
            (
                "parameters",
                f"{n_lm:,} in `lm_weights.hdf5` (float32), {n_softmax:,} in `softmax.hdf5`",
            ),
        ]
    )
    training_table = _table(
        [
            (
                "configuration",
                f"`cpu` (elmo_keras/training/configs.py): batch {config['batch_size']} x "
                f"{config['unroll_steps']} tokens, sampled softmax with "
                f"{config['n_negative_samples_batch']} candidates, {config['optimizer']} "
                f"{config['learning_rate']}, dropout {config['dropout']}, gradient clip "
                f"{config['all_clip_norm_val']}, LSTM state carried across windows, seed "
                f"{settings['seed']}",
            ),
            (
                "steps",
                f"{log['steps']:,} ({log['tokens']:,} tokens, {epochs:.2f} epochs of "
                "WikiText-2 train)",
            ),
            (
                "wall time",
                f"{log['seconds']:,} s ({hours:.2f} h) of training in {log['invocations']} "
                "invocation(s), not counting start-up and evaluation",
            ),
            ("machine", f"{cpu_description()}; TensorFlow 2.21 on the CPU, shared with other jobs"),
        ]
    )
    return f"""# mini_en: a small English biLM trained on WikiText-2

The package's own pretrained ELMo biLM (preset `mini_en`), in the published bilm-tf format:
`options.json` + `lm_weights.hdf5` (character CNN and LSTMs: what ELMo embeds with), plus
`vocab.txt` + `softmax.hdf5` (the output layer, for perplexity and for fine-tuning with
`elmo-keras train --init-from mini_en`). Trained on this machine by
`experiments/mini_en/train.sh`; this card is written by `experiments/mini_en/package.py`
on {datetime.date.today().isoformat()}.

It is small and trained on 2M words: use it to learn and test the package, to see what ELMo
layers do, and as a starting point for fine-tuning on your domain. For real tasks, the published
models (`elmo-keras presets`) were trained on 800M-5.5B words and are far better.

## Corpus

WikiText-2 raw (Merity et al. 2016; CC BY-SA), whitespace-tokenized as released, one paragraph a
line; `elmo-keras` fetches the same files from a pinned archive (`elmo_keras.training.datasets.
wikitext2`, see ../shared/data/README.md). Training used `train.raw.txt` only; words seen fewer
than 3 times map to `<UNK>` (vocabulary {len(vocabulary):,} entries with `<S>`, `</S>`, `<UNK>`).
No other text was added: the held-out comparison is on WikiText-2's own test split, and the
training budget covered {epochs:.1f} passes over these 2M words. Prose from other pinned packages
would widen the biLM's domain at the cost of passes over WikiText-2; it was not tried.

| file | bytes | sha256 |
|---|---|---|
{corpus_rows}

## Model

{model_table}

## Training

{training_table}

Rebuild (resumable: run it again after an interruption and it continues from the last
checkpoint to the same model):

```bash
experiments/mini_en/train.sh runs/mini_en 2>&1 | tee -a runs/mini_en/train_log.txt
python experiments/mini_en/package.py runs/mini_en --log runs/mini_en/train_log.txt
```

## Held-out perplexity (full softmax, LSTM state carried, batch 16 x 20)

| split | forward | backward | average | add-one unigram |
|---|---|---|---|---|
{valid_line}
{test_line}

For comparison, the same configuration trained for 43 minutes (7,131 steps, docs/training.md)
reached {REFERENCE_43_MIN} on the test split (counted over 241,211 words there; this table counts
every target token, sentence ends included, as that evaluation did). That model is not shipped.
{_comparison(test[2])}

Validation perplexity at the end of each training invocation: {_history(log)}. Each invocation
ended where the log says (a SIGINT when the session's time ran out, or the planned steps);
`STEPS` in train.sh is set to where the last one stopped, so the rebuild reproduces this model
(resume is bit-exact, and the learning rate is constant, so the planned length does not change
the steps before it).

## Files

| file | bytes | sha256 |
|---|---|---|
{file_rows}
"""


def _comparison(test_average):
    gap = test_average - REFERENCE_43_MIN
    if gap <= 0:
        return f"This model's test perplexity is {-gap:.1f} lower."
    return f"This model's test perplexity is {gap:.1f} higher; the cause is not known."


def _history(log):
    return ", ".join(f"{ppl:.1f} at step {steps:,}" for steps, ppl in log["history"]) or "none"


def _table(rows):
    return "| | |\n|---|---|\n" + "\n".join(f"| {key} | {value} |" for key, value in rows)


def _count_tokens(path):
    with open(path, encoding="utf-8") as f:
        return sum(len(line.split()) + 1 for line in f if line.strip())


if __name__ == "__main__":
    main()
