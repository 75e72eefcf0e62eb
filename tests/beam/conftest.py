"""Session fixtures for the Beam tests: a small corpus. The model is `onnx_model` (the AllenNLP
fixture biLM as ONNX) from tests/conftest.py."""

import pytest

# Three small files, each with an empty line; the second has a byte-order mark, a "\r\n", a
# vertical tab inside a line (whitespace between tokens, not a line end) and no final "\n".
CORPUS = {
    "news.txt": "The bank raised its rates .\n\nShe sat on the river bank .\n",
    "mixed.txt": "\ufeffHello world\r\nx\x0by z\n\nDéjà vu , naïve café !\nlast line",
    "short.txt": "one\ntwo three\n\n\nfour .\n",
}


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """A folder holding the three `CORPUS` files (written as UTF-8 bytes, newlines as given)."""
    folder = tmp_path_factory.mktemp("corpus")
    for name, text in CORPUS.items():
        (folder / name).write_bytes(text.encode("utf-8"))
    return folder
