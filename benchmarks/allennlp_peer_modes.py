"""The modes of `allennlp_peer.py`, one per child process: AllenNLP's `Elmo` imported from a
checkout (its unrelated imports stubbed), `elmo_keras.allennlp.Elmo`, and `BiLMEmbedder`.

Each gives `calls(batches)`, the workload as callables, and `layers(sentences, n_layers)`, each
layer's vectors of every real token, for the agreement check.
"""

import pathlib
import sys
import types

import numpy as np

SORTED_BATCH = 32


def _package(name, path=None, **attributes):
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [str(path)]  # submodules load from the checkout's files
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def stub_allennlp(src):
    """Makes AllenNLP's ELMo modules importable from the checkout `src` without its package
    `__init__`s (which import the whole library) by stubbing what ELMo does not use."""

    class Registrable:
        @classmethod
        def register(cls, name, *args, **kwargs):
            return lambda subclass: subclass

    class Unused:
        def __init__(self, *args, **kwargs):
            raise NotImplementedError("not part of the ELMo modules this benchmark runs")

    root = pathlib.Path(src) / "allennlp"
    _package("allennlp", root)
    _package("allennlp.common", root / "common", FromParams=object, Registrable=Registrable)
    _package("allennlp.common.file_utils", cached_path=str)
    _package(
        "allennlp.common.util",
        lazy_groups_of=None,
        int_to_device=lambda device: device,
        is_distributed=lambda: False,
        is_global_primary=lambda: True,
        pad_sequence_to_length=None,
    )
    _package("allennlp.nn", root / "nn")
    _package("allennlp.modules", root / "modules")
    _package("allennlp.data", root / "data")
    for name in ("instance", "batch", "vocabulary", "fields", "tokenizers"):
        _package(
            f"allennlp.data.{name}",
            Instance=Unused,
            Batch=Unused,
            Vocabulary=Unused,
            TextField=Unused,
            Token=Unused,
        )
    _package("allennlp.data.tokenizers.token_class", Token=Unused)
    _package("allennlp.data.token_indexers", root / "data" / "token_indexers")
    _package(
        "allennlp.data.token_indexers.token_indexer",
        TokenIndexer=type("TokenIndexer", (Registrable,), {}),
        IndexedTokenList=dict,
    )
    import allennlp.nn.util  # noqa: F401, PLC0415  (scalar_mix.py: `from allennlp.nn import util`)

    sys.modules["allennlp.nn"].util = sys.modules["allennlp.nn.util"]


class ElmoModule:
    """What the two `Elmo`s share: a workload is one call per batch; layers through the mix."""

    def calls(self, batches):
        """The workload as callables, one per batch."""
        return [lambda batch=batch: self(batch) for batch in batches]

    def layers(self, sentences, n_layers):
        """[n_layers] arrays `[tokens of all sentences, dim]`, through the mix fixed to each
        layer in turn."""
        out = []
        for layer in range(n_layers):
            self.fix_mix(layer)
            result = self(sentences)
            out.append(result["elmo_representations"][0].numpy()[result["mask"].numpy()])
        return out


class AllenNLPElmo(ElmoModule):
    """AllenNLP's `Elmo` and its character ids (`ELMoCharacterMapper`, as its `batch_to_ids`)."""

    def __init__(self, src, options_path, weights_path):
        stub_allennlp(src)
        from allennlp.data.token_indexers.elmo_indexer import ELMoCharacterMapper
        from allennlp.modules.elmo import Elmo

        self.mapper = ELMoCharacterMapper()
        self.elmo = Elmo(str(options_path), str(weights_path), 1, dropout=0.0).eval()
        self.mix = self.elmo.scalar_mix_0

    def char_ids(self, sentences):
        import torch

        longest = max(len(s) for s in sentences)
        ids = np.zeros((len(sentences), longest, 50), np.int64)
        for row, sentence in enumerate(sentences):
            for column, token in enumerate(sentence):
                ids[row, column] = self.mapper.convert_word_to_char_ids(token)
        return torch.from_numpy(ids)

    def __call__(self, sentences):
        self.elmo._elmo_lstm._elmo_lstm.reset_states()  # stateless, as the other modes
        return self.elmo(self.char_ids(sentences))

    def fix_mix(self, layer):
        for k, parameter in enumerate(self.mix.scalar_parameters):
            parameter.data.fill_(0.0 if k == layer else -9e10)


class KerasElmo(ElmoModule):
    """`elmo_keras.allennlp.Elmo`, the drop-in."""

    def __init__(self, options_path, weights_path):
        from elmo_keras.allennlp import Elmo, batch_to_ids

        self.batch_to_ids = batch_to_ids
        self.elmo = Elmo(str(options_path), str(weights_path), 1, dropout=0.0).eval()
        self.mix = self.elmo.scalar_mix_0

    def __call__(self, sentences):
        return self.elmo(self.batch_to_ids(sentences))

    def fix_mix(self, layer):
        n = self.mix.n_layers
        self.mix.scalar_weights.assign([0.0 if k == layer else -9e10 for k in range(n)])


class Embedder:
    """`BiLMEmbedder` on the process's Keras backend."""

    def __init__(self, options_path, weights_path):
        from elmo_keras.models import BiLM, BiLMEmbedder

        bilm = BiLM.from_bilm_tf(options_path, weights_path)
        self.embedder = BiLMEmbedder(bilm, batch_size=SORTED_BATCH, max_tokens=1 << 20)

    def calls(self, batches):
        """One call for the workload: `embed` sorts and batches by `batch_size` itself."""
        sentences = [s for batch in batches for s in batch]
        size = len(batches[0])

        def call():
            self.embedder.batch_size = size
            return self.embedder.embed(sentences)

        return [call]

    def layers(self, sentences, n_layers):
        self.embedder.batch_size = len(sentences)
        return list(np.concatenate(self.embedder.embed(sentences), axis=1))


class OnnxModel(Embedder):
    """`OnnxEmbedder` over the package's ONNX export of the same weights (`elmo_keras.export`,
    made once into `WORKDIR/export/`, outside the clock), run by ONNX Runtime."""

    def __init__(self, options_path, weights_path):
        from elmo_keras.export import export_model

        from elmo_keras.runtime import OnnxEmbedder

        output = pathlib.Path(weights_path).parent / "export"
        model = output / "model.onnx"
        if (
            not model.is_file()
            or model.stat().st_mtime < pathlib.Path(weights_path).stat().st_mtime
        ):
            export_model(options_path, weights_path, output, formats="onnx", overwrite=True)
        self.embedder = OnnxEmbedder(model, batch_size=SORTED_BATCH, max_tokens=1 << 20)


def set_threads(mode, n):
    """`n` threads for the mode's library (0: its default), before it runs anything."""
    if not n:
        return
    if mode == "onnx":
        return  # ONNX Runtime's session threads: its default (one per core)
    if mode == "embedder_tf":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(n)
        return
    import torch

    torch.set_num_threads(n)


def threads(mode):
    if mode == "onnx":
        return {"onnxruntime": "default"}
    if mode == "embedder_tf":
        import tensorflow as tf

        pools = tf.config.threading
        return {
            "tensorflow_intra_op": pools.get_intra_op_parallelism_threads(),
            "tensorflow_inter_op": pools.get_inter_op_parallelism_threads(),
        }
    import torch

    return {"torch": torch.get_num_threads()}


def load(mode, allennlp_src, options_path, weights_path):
    if mode == "allennlp":
        return AllenNLPElmo(allennlp_src, options_path, weights_path)
    if mode == "elmo_torch":
        return KerasElmo(options_path, weights_path)
    if mode == "onnx":
        return OnnxModel(options_path, weights_path)
    return Embedder(options_path, weights_path)
