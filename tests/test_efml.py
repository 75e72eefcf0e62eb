"""Reading ELMoForManyLangs folders (`elmo_keras.efml`): configs, dictionaries, weight names."""

import json
import shutil

import numpy as np
import pytest

from elmo_keras import efml
from elmo_keras.text.token_dictionary import TokenDictionary
from tests.efml_writer import efml_state_dicts, write_efml_folder

CHARS = ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>", "a", "b", "é"]
WORDS = ["<oov>", "<bos>", "<eos>", "<pad>", "ab"]
SMALL = {
    "encoder": {
        "name": "elmo",
        "projection_dim": 4,
        "cell_clip": 3,
        "proj_clip": 3,
        "dim": 8,
        "n_layers": 2,
    },
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 2], [2, 3]],
        "n_highway": 1,
        "word_dim": 3,
        "char_dim": 5,
        "max_characters_per_token": 6,
    },
}


def test_network_config_is_found_as_efml_finds_it(tmp_path, efml_fixture):
    # relative config_path; an absolute one that does not exist -> its file name in the folder
    chars = efml.network_config(efml_fixture / "cnn_elmo_chars")
    assert chars["encoder"]["dim"] == 64
    assert efml.network_config(efml_fixture / "cnn_elmo_words")["encoder"]["cell_clip"] == 2.5
    # a published folder: the bundled config's name, no such file -> EFML's bundled values
    folder = tmp_path / "published"
    shutil.copytree(efml_fixture / "cnn_elmo_words", folder)
    (folder / "cnn_20_24_24_48_sample.json").unlink()
    config = json.loads((folder / "config.json").read_text())
    config["config_path"] = "/home/x/configs/cnn_50_100_512_4096_sample.json"
    (folder / "config.json").write_text(json.dumps(config))
    assert efml.network_config(folder) == efml.PUBLISHED_NETWORK
    config["config_path"] = "mine.json"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="'mine.json' names no network config"):
        efml.network_config(folder)


def test_dictionary_lines_are_read_as_efml_reads_them(tmp_path):
    path = tmp_path / "char.dic"
    path.write_text("a\t0\n \t1\nb\t2\n", encoding="utf-8")  # a space entry: strip() empties it
    assert efml.read_dictionary(path) == ["a", "\u3000", "b"]
    path.write_text("a\t0\nb\t2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="ids must run from 0 to 1 without gaps"):
        efml.read_dictionary(path)


def test_token_rows_follow_efml_conventions():
    dictionary = TokenDictionary(CHARS, WORDS, max_characters_per_token=6)
    # <eow> first, <bow> last (swapped), <pad> after; ids + 1; the word id last, unshifted
    assert dictionary.token_ids("ab").tolist() == [6, 7, 8, 5, 4, 4, 4]
    assert dictionary.token_ids("abab").tolist() == [6, 7, 8, 7, 8, 5, 0]  # 4 code points
    assert dictionary.token_ids("ababa")[:6].tolist() == [6, 7, 8, 7, 8, 5]  # cut to 4
    assert dictionary.token_ids("ababa")[6] == 0  # the cut token "abab" is not "ab": <oov>
    assert dictionary.token_ids("é?")[:4].tolist() == [6, 9, 3, 5]  # code points; ? is <oov>
    # the boundaries are never cut; a literal "<bos>" is cut first ("<bos", not the marker)
    assert dictionary.boundary_ids().tolist() == [[6, 1, 5, 4, 4, 4, 1], [6, 2, 5, 4, 4, 4, 2]]
    assert dictionary.token_ids("<bos>").tolist() == [6, 3, 8, 3, 3, 5, 0]
    wide = TokenDictionary(CHARS, WORDS, max_characters_per_token=7)
    assert wide.token_ids("<bos>").tolist() == wide.boundary_ids()[0].tolist()
    with pytest.raises(ValueError, match=r"Missing: \['<bow>'\]"):
        TokenDictionary([c for c in CHARS if c != "<bow>"])


def test_weight_mapping_of_a_written_folder(tmp_path):
    folder = write_efml_folder(tmp_path / "m", SMALL, CHARS, WORDS, seed=3, legacy=True)
    kwargs, arrays = efml.read_folder(folder)
    token, lstm = efml_state_dicts(SMALL, len(CHARS), len(WORDS), seed=3)
    assert kwargs["char_vocabulary"] == CHARS and kwargs["word_vocabulary"] == WORDS
    assert kwargs["cell_forget_bias"] == 0.0 and kwargs["word_embedding_dim"] == 3
    gate = token["highways._layers.0.weight"][5:]  # rows F: of (2F, F), F = 5 filters
    np.testing.assert_array_equal(arrays["CNN_high_0/W_carry"], -gate.T)
    np.testing.assert_array_equal(arrays["word_embed"], token["word_emb_layer.embedding.weight"])
    kernel = np.concatenate(
        [
            lstm["backward_layer_1.input_linearity.weight"].T,
            lstm["backward_layer_1.state_linearity.weight"].T,
        ]
    )
    blocks = np.split(kernel, 4, axis=1)  # i, f, g, o -> bilm-tf's i, j(g), f, o
    w0 = arrays["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"]
    np.testing.assert_array_equal(
        w0, np.concatenate([blocks[0], blocks[2], blocks[1], blocks[3]], 1)
    )


def test_other_efml_networks_are_one_line(tmp_path):
    network = {**SMALL, "encoder": {**SMALL["encoder"], "name": "lstm"}}
    folder = write_efml_folder(tmp_path / "m", network, CHARS, WORDS)
    with pytest.raises(ValueError, match="only EFML's `elmo` encoder .* Received: encoder 'lstm'"):
        efml.read_folder(folder)
    assert not efml.is_efml_folder(tmp_path) and efml.is_efml_folder(folder)
