"""What the studies in `experiments/` share: where data and results live, which biLM they study
(`--bilm-dir` or `--fixture`), and headless plotting."""

import hashlib
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "experiments" / "results"
FIXTURE_BILM = ROOT / "elmo_keras" / "assets" / "tiny_allennlp"


def add_bilm_arguments(parser):
    """`--bilm-dir`, `--fixture` and `--output-dir`, as every study takes them."""
    parser.add_argument(
        "--bilm-dir", type=pathlib.Path, default=ROOT / "elmo_keras" / "assets" / "mini_en"
    )
    parser.add_argument("--fixture", action="store_true", help="use the tiny packaged biLM")
    parser.add_argument("--output-dir", type=pathlib.Path, default=RESULTS)


def _training_summary(bilm_dir):
    """What `elmo_keras.training` reported for the run in `bilm_dir`, if it is there."""
    if not (bilm_dir / "summary.json").exists():
        return None
    info = json.loads((bilm_dir / "summary.json").read_text())
    return {
        "config": info.get("config"),
        "train": info.get("train"),
        "test_perplexity": (info.get("test") or {}).get("perplexity"),
        "unigram_perplexity": info.get("unigram_perplexity"),
    }


def load_bilm_for(args):
    """The biLM to study: `(bilm, name, info)`; `info` has the weight file's SHA-256 and the
    training summary (both `None` for the fixture)."""
    from elmo_keras.models import BiLM

    if args.fixture:
        bilm = BiLM.from_bilm_tf(FIXTURE_BILM / "options.json", FIXTURE_BILM / "lm_weights.hdf5")
        return bilm, "tiny", {"weights_sha256": None, "training_summary": None}
    weights = sorted(args.bilm_dir.glob("*.hdf5"))
    weights = [w for w in weights if "weights" in w.name] or weights
    if not weights:
        raise SystemExit(f"error: no hdf5 weight file in {args.bilm_dir} (or pass --fixture)")
    info = {
        "weights_sha256": hashlib.sha256(weights[0].read_bytes()).hexdigest(),
        "training_summary": _training_summary(args.bilm_dir),
    }
    return BiLM.from_bilm_tf(args.bilm_dir / "options.json", weights[0]), args.bilm_dir.name, info


def pyplot():
    """`matplotlib.pyplot` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
