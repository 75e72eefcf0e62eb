"""The runtime tests use the session fixtures `keras_bilm` (the AllenNLP fixture biLM) and
`onnx_model` (it, converted to ONNX once) from tests/conftest.py."""
