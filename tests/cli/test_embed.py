import h5py
import numpy as np
import pytest

from elmo_keras.cli import main
from elmo_keras.text import batch_to_char_ids
from tests.cli.embed_helpers import SENTENCES, one_error_line, read


def test_embed_writes_one_dataset_per_line_independent_of_batch_size(
    tmp_path, model_args, input_file, keras_bilm, capsys
):
    from elmo_keras.models.bilm_embedder import BiLMEmbedder

    outputs = {}
    # (3, 6): a budget of 6 padded tokens (issue 10) puts "Hello" and "A b c d" apart and
    # each long sentence alone.
    for batch_size, max_tokens in ((1, 4096), (3, 6), (64, 4096)):
        out = tmp_path / f"out{batch_size}.hdf5"
        argv = ["embed", *model_args, "--input", str(input_file), "--output", str(out)]
        argv += ["--batch-size", str(batch_size), "--max-tokens", str(max_tokens)]
        assert main(argv) == 0
        outputs[batch_size] = read(out)
    assert "wrote 5 sentences (28 tokens)" in capsys.readouterr().out
    data = outputs[1]
    assert sorted(data, key=int) == [str(i) for i in range(5)]
    for i, sentence in enumerate(SENTENCES):
        assert data[str(i)].shape == (3, len(sentence.split()), 32)
        assert data[str(i)].dtype == np.float32
        for other in (3, 64):
            np.testing.assert_allclose(outputs[other][str(i)], data[str(i)], atol=1e-6, rtol=0)
    # Each sentence equals the model run on that sentence alone, from zero state.
    bilm = keras_bilm  # the same files as `model_args`, loaded once per session
    alone = bilm(batch_to_char_ids([SENTENCES[2].split()]))["activations"].numpy()[0]
    np.testing.assert_allclose(data["2"], alone, atol=1e-6, rtol=0)
    # Streamed and written batch by batch, the file holds what the embedder gives for the
    # whole list (the same batches with the default budget: the same numbers, bit for bit).
    expected = BiLMEmbedder(bilm).embed([line.split() for line in SENTENCES])
    assert sorted(outputs[64], key=int) == [str(i) for i in range(len(expected))]
    for i, array in enumerate(expected):
        np.testing.assert_array_equal(outputs[64][str(i)], array)


def test_embed_bad_input_fails_cleanly(tmp_path, model_args, capsys):
    out = tmp_path / "out.hdf5"
    code = main(
        ["embed", *model_args, "--input", str(tmp_path / "missing.txt"), "--output", str(out)]
    )
    assert code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"elmo-keras embed: error: input file not found: {tmp_path / 'missing.txt'}"]
    assert not out.exists()
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    assert (
        main(["embed", *model_args, "--input", str(tmp_path / "latin1.txt"), "--output", str(out)])
        != 0
    )
    assert "is not UTF-8 text" in capsys.readouterr().err
    assert list(tmp_path.glob("*hdf5*")) == []


def test_embed_bad_weights_leave_no_output(tmp_path, input_file, allennlp_fixture, capsys):
    bad = tmp_path / "bad.hdf5"
    bad.write_bytes(b"garbage")
    out = tmp_path / "out.hdf5"
    code = main(
        [
            "embed",
            "--options",
            str(allennlp_fixture / "options.json"),
            "--weights",
            str(bad),
            "--input",
            str(input_file),
            "--output",
            str(out),
        ]
    )
    assert code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a readable hdf5 file" in err[0]
    assert not out.exists() and not list(tmp_path.glob(".out.hdf5*"))


def test_embed_refuses_to_overwrite_and_checks_arguments(tmp_path, model_args, input_file, capsys):
    out = tmp_path / "out.hdf5"
    out.write_bytes(b"keep me")
    assert main(["embed", *model_args, "--input", str(input_file), "--output", str(out)]) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert out.read_bytes() == b"keep me"
    assert (
        main(
            [
                "embed",
                *model_args,
                "--input",
                str(input_file),
                "--output",
                str(out),
                "--batch-size",
                "0",
            ]
        )
        == 2
    )
    assert "--batch-size must be a positive integer. Received: 0" in capsys.readouterr().err
    for bad in ("0", "-3"):
        argv = ["embed", *model_args, "--input", str(input_file), "--output", str(out)]
        assert main([*argv, "--max-tokens", bad]) == 2
        assert one_error_line(capsys) == (
            f"elmo-keras embed: error: --max-tokens must be a positive integer. Received: {bad}"
        )
    assert out.read_bytes() == b"keep me"
    assert main(["embed", "--input", str(input_file), "--output", str(tmp_path / "new.hdf5")]) == 2
    assert "needs --options and --weights" in capsys.readouterr().err


def test_onnx_backend_writes_the_same_hdf5(tmp_path, model_args, input_file, onnx_model):
    keras_out, onnx_out = tmp_path / "keras.hdf5", tmp_path / "onnx.hdf5"
    assert main(["embed", *model_args, "--input", str(input_file), "--output", str(keras_out)]) == 0
    assert (
        main(
            [
                "embed",
                "--backend",
                "onnx",
                "--model",
                str(onnx_model),
                "--input",
                str(input_file),
                "--output",
                str(onnx_out),
                "--batch-size",
                "2",
            ]
        )
        == 0
    )
    a, b = read(keras_out), read(onnx_out)
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key].shape == b[key].shape
        np.testing.assert_allclose(b[key], a[key], atol=1e-5, rtol=0)


def test_dataset_index_is_the_line_number_whatever_the_line_contains(tmp_path, model_args):
    # Issue 12, D3 and D11: only "\n" ends a line, "\r\n" is one line end, a BOM is dropped.
    from elmo_keras.cli._common import read_sentences

    text = "\ufeffFirst line\r\nsplit\vby\x1cseparators\x85and\u2028more\n\nlast\n"
    path = tmp_path / "odd.txt"
    path.write_bytes(text.encode("utf-8"))
    sentences = read_sentences(path)
    assert sentences == [
        ["First", "line"],
        ["split", "by", "separators", "and", "more"],
        [],
        ["last"],
    ]
    out = tmp_path / "odd.hdf5"
    assert main(["embed", *model_args, "--input", str(path), "--output", str(out)]) == 0
    assert sorted(read(out), key=int) == ["0", "1", "2", "3"]
    assert read(out)["1"].shape[1] == 5


# Issue 13: published models by name (--preset) and model files by URL.


@pytest.fixture
def mirror(monkeypatch, tmp_path):
    from tests.file_io.test_download import FileServer, serve_presets

    server = serve_presets(FileServer(), monkeypatch, tmp_path)
    yield server
    server.stop()


def test_embed_with_a_preset_or_urls_equals_the_local_files(
    tmp_path, mirror, model_args, input_file
):
    local, by_name, by_url = (tmp_path / f"{n}.hdf5" for n in ("local", "preset", "url"))
    stem = "/elmo/2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway"
    common = ["--input", str(input_file), "--batch-size", "2"]
    assert main(["embed", *model_args, *common, "--output", str(local)]) == 0
    assert main(["embed", "--preset", "original", *common, "--output", str(by_name)]) == 0
    urls = ["--options", mirror.url(f"{stem}_options.json")]
    urls += ["--weights", mirror.url(f"{stem}_weights.hdf5")]
    assert main(["embed", *urls, *common, "--output", str(by_url)]) == 0
    expected = read(local)
    for path in (by_name, by_url):
        got = read(path)
        assert sorted(got) == sorted(expected)
        for key in expected:
            np.testing.assert_array_equal(got[key], expected[key])
    assert len(mirror.requests(f"{stem}_weights.hdf5")) == 1  # the URL run used the cache


def test_embed_preset_errors_are_one_line(tmp_path, mirror, input_file, capsys):
    out = tmp_path / "out.hdf5"
    common = ["--input", str(input_file), "--output", str(out)]
    assert main(["embed", "--preset", "large", *common]) == 2
    assert "--preset: `preset` must be one of 'small'" in capsys.readouterr().err
    assert main(["embed", "--preset", "tiny", "--model", str(tmp_path), *common]) == 2
    assert "give one of --preset NAME, --model DIR" in capsys.readouterr().err
    mirror.faults[
        "/elmo/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5"
    ] = "cut"
    assert main(["embed", "--preset", "small", *common]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("elmo-keras embed: error: could not download http")
    assert not out.exists()


def test_damaged_weights_are_one_line_naming_the_file(
    tmp_path, input_file, allennlp_fixture, capsys
):
    weights = tmp_path / "lm_weights.hdf5"
    out = tmp_path / "out.hdf5"
    argv = ["embed", "--options", str(allennlp_fixture / "options.json"), "--weights"]
    argv += [str(weights), "--input", str(input_file), "--output", str(out)]
    source = (allennlp_fixture / "lm_weights.hdf5").read_bytes()
    weights.write_bytes(source[: len(source) // 2])  # truncated
    assert main(argv) == 1
    assert f"weight file {weights} is not a readable hdf5 file" in one_error_line(capsys)
    # Finite but absurd weights (a damaged exponent) pass the load and overflow in the model:
    # the output is refused rather than written with NaN. Every line overflows; the first
    # one written is named: the shortest, line 4 (batches stream shortest first).
    weights.write_bytes(source)
    with h5py.File(weights, "r+") as handle:
        handle["CNN_proj/W_proj"][...] = handle["CNN_proj/W_proj"][...] * 1e38
    assert main(argv) == 1
    assert one_error_line(capsys) == (
        "elmo-keras embed: error: the model gave NaN or infinite values for line 4 (are the "
        f"weights damaged?); nothing was written to {out}"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm_weights.hdf5", "sentences.txt"]
