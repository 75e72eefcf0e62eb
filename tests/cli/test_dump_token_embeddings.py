"""`elmo-keras dump-token-embeddings` (bilm-tf's `dump_token_embeddings`) and the token-id path
that reads its file. References: the AllenNLP fixture's `elmo_token_embeddings.hdf5` (written by
bilm-tf for `vocab_test.txt`), the char CNN path."""

import h5py
import numpy as np
import pytest

from elmo_keras.cli import main
from elmo_keras.models import BiLM, ElmoEmbedding
from elmo_keras.text import Vocabulary, batch_to_char_ids

SENTENCES = [["The", "U.S.", "Centers", "for", "Disease", "Control", "."], ["said", "Bush"]]


@pytest.fixture(scope="module")
def dumped(allennlp_fixture, tmp_path_factory):
    out = tmp_path_factory.mktemp("dump") / "token_embeddings.hdf5"
    argv = ["dump-token-embeddings", "--vocab", str(allennlp_fixture / "vocab_test.txt")]
    argv += ["--options", str(allennlp_fixture / "options.json")]
    argv += ["--weights", str(allennlp_fixture / "lm_weights.hdf5"), "--output", str(out)]
    assert main(argv) == 0
    return out


def test_the_file_is_bilm_tfs(dumped, allennlp_fixture):
    with (
        h5py.File(dumped, "r") as got,
        h5py.File(allennlp_fixture / "elmo_token_embeddings.hdf5", "r") as want,
    ):
        assert list(got) == ["embedding"] and got["embedding"].dtype == np.float32
        assert got["embedding"].shape == want["embedding"].shape == (458, 16)
        # bilm-tf's TF1 char CNN against ours: float32 round-off (test_bilm.py uses 1e-5 too).
        np.testing.assert_allclose(got["embedding"][...], want["embedding"][...], atol=1e-5)


def test_token_ids_with_the_file_equal_the_char_cnn_path(dumped, allennlp_fixture):
    bilm = BiLM.from_bilm_tf(
        allennlp_fixture / "options.json", allennlp_fixture / "lm_weights.hdf5"
    )
    vocab_file = allennlp_fixture / "vocab_test.txt"
    elmo = ElmoEmbedding.from_token_embeddings(bilm, vocab_file, dumped, dropout=0.0)
    ids = elmo.word_ids(SENTENCES)
    vocab = Vocabulary.load(vocab_file)
    assert ids[1, :2].tolist() == [vocab.token_to_id("said") + 1, vocab.token_to_id("Bush") + 1]
    plain = ElmoEmbedding(bilm, dropout=0.0)
    np.testing.assert_allclose(
        np.asarray(elmo(ids)), np.asarray(plain(batch_to_char_ids(SENTENCES))), atol=1e-6
    )
    # The biLM itself on token ids: the file's rows and -1 for padding.
    rows = h5py.File(dumped, "r")["embedding"][...]
    got = bilm({"token_vectors": rows, "token_index": ids - 1})["activations"]
    want = bilm(batch_to_char_ids(SENTENCES))["activations"]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-6)


def test_a_file_of_another_vocabulary_is_refused(dumped, tmp_path, allennlp_fixture):
    bilm = BiLM.from_bilm_tf(
        allennlp_fixture / "options.json", allennlp_fixture / "lm_weights.hdf5"
    )
    short = tmp_path / "vocab.txt"
    short.write_text("<S>\n</S>\nthe\n", encoding="utf-8")
    message = r"has shape \(\d+, 16\), but one row per token of .*\(3\) needs \(3, 16\)"
    with pytest.raises(ValueError, match=message):
        ElmoEmbedding.from_token_embeddings(bilm, short, dumped)


def test_a_bad_vocabulary_is_one_line_exit_1(tmp_path, allennlp_fixture, capsys):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("the\n\ncat\n", encoding="utf-8")
    argv = ["dump-token-embeddings", "--vocab", str(vocab), "--output", str(tmp_path / "o.h5")]
    argv += ["--options", str(allennlp_fixture / "options.json")]
    argv += ["--weights", str(allennlp_fixture / "lm_weights.hdf5")]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "--vocab" in err and "line 2" in err and "\n" not in err
    assert not (tmp_path / "o.h5").exists()
    # A missing vocabulary, or a folder, is a usage mistake (exit 2), as for every command.
    for missing in (tmp_path / "none.txt", tmp_path):
        argv[2] = str(missing)
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "--vocab" in err, err


@pytest.mark.parametrize("flag", ["--model", "--preset"])
def test_an_efml_model_dumps_efml_token_vectors(flag, efml_fixture, tmp_path):
    """Each token's row is EFML's layer 0 for it (the fixture's first half of `[token;
    token]`), its ids made through the model's own dictionaries; <S> and </S> are the model's
    <bos>, <eos> (the fixture's marker rows)."""
    import json

    model = "cnn_elmo_words"
    sentences = json.loads((efml_fixture / "sentences.json").read_text())["sentences"]
    where = {}  # token -> (sentence, position) of one occurrence
    for i, sentence in enumerate(sentences):
        for j, token in enumerate(sentence):
            if token.strip() and token == "".join(token.split()):  # one line, one token
                where.setdefault(token, (i, j))
    tokens = ["<S>", "</S>", *where]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    out = tmp_path / "tokens.hdf5"
    argv = ["dump-token-embeddings", "--vocab", str(vocab), flag, str(efml_fixture / model)]
    assert main([*argv, "--output", str(out)]) == 0
    with (
        h5py.File(out, "r") as got,
        h5py.File(efml_fixture / f"{model}.expected.h5", "r") as h5,
    ):
        rows = got["embedding"][...]
        half = rows.shape[1]
        marked = h5["with_markers"]["000"][()][0]  # layer 0 of sentence 0 with its markers
        np.testing.assert_allclose(rows[0], marked[0, :half], atol=2e-5)
        np.testing.assert_allclose(rows[1], marked[-1, :half], atol=2e-5)
        want = [h5["all_layers"][f"{i:03d}"][()][0, j, :half] for i, j in where.values()]
    np.testing.assert_allclose(rows[2:], np.stack(want), atol=2e-5)
    assert len(where) > 100 and rows.shape == (len(tokens), 24)
