import logging

import keras
import numpy as np
import torch

from elmo_keras.layers.scalar_mix import ScalarMix
from elmo_keras.models.bilm import BiLM
from elmo_keras.models.elmo_inputs import (
    cached_word_inputs,
    cached_word_vectors,
    check_mix_parameters,
    check_vocab_to_cache,
    set_bilm_trainable,
)
from elmo_keras.text.char_ids import batch_to_char_ids
from elmo_keras.validation import check_int, check_number

logger = logging.getLogger(__name__)

# AllenNLP's ScalarMix adds `tiny_value_of_dtype(float32)` to the variance; bilm-tf adds 1e-12.
ALLENNLP_LAYER_NORM_EPSILON = 1e-13


def batch_to_ids(batch):
    """Tokenized sentences -> AllenNLP's character ids: an int64 tensor `[batch, tokens, 50]`.

    Each token is `[BOW, its UTF-8 bytes (48 at most), EOW, PAD, ...]` shifted by +1 (so `261`
    pads a token and `0` is a padding position); `"<S>"` and `"</S>"` give the boundary rows.
    The same ids as `allennlp.modules.elmo.batch_to_ids`, made by
    `elmo_keras.text.batch_to_char_ids`.

    Args:
        batch: list of lists of str. The tokens of each sentence.

    Returns:
        A `torch.LongTensor` `[len(batch), longest sentence, 50]`.

    Example:
    >>> batch_to_ids([["Hello", "world"], ["Hi"]]).shape
    torch.Size([2, 2, 50])
    """
    return torch.from_numpy(batch_to_char_ids(batch).astype(np.int64))


def load_bilm(options_file, weight_file):
    """The `BiLM` of AllenNLP's two file arguments, or of a preset.

    `options_file` and `weight_file` are paths or URLs (downloaded once into the cache); with
    `weight_file=None` (or the same string), `options_file` is a preset name (`"original"`,
    `"small"`, ...) or a model folder. The biLM has no dropout of its own, as AllenNLP's, and a
    fixed name, so that the `state_dict` keys of every `Elmo` are the same.
    """
    if weight_file is None or weight_file == options_file:
        return BiLM.from_preset(options_file, dropout=0.0, name="bilm")
    return BiLM.from_bilm_tf(options_file, weight_file, dropout=0.0, name="bilm")


class Elmo(torch.nn.Module):
    """AllenNLP's `Elmo` on this package's biLM: character ids -> ELMo representations.

    A `torch.nn.Module` with the arguments, `forward` and outputs of
    `allennlp.modules.elmo.Elmo`: it runs the biLM once and mixes its `n_layers + 1` layers
    with `num_output_representations` independent scalar mixes, each followed by dropout. With
    `dropout=0` its outputs equal AllenNLP's (docs/allennlp.md), `do_layer_norm=True` included:
    the layer-norm statistics are taken over the real tokens and the `<S>`/`</S>` positions, as
    AllenNLP takes them (`ElmoEmbedding`'s leave the boundaries out). The biLM (a Keras `BiLM`)
    and the mixes (Keras `ScalarMix` layers) are torch modules on Keras's torch backend: their
    weights are this module's parameters, moved by `.to(device)` and saved by `state_dict()`;
    `.train()` / `.eval()` switch the dropout.

    Unlike AllenNLP's, every batch starts from zero LSTM state, so a sentence's vectors do not
    depend on the batches before it. For AllenNLP's stateful behaviour, call `elmo.bilm` with
    the previous call's `"state_h"` and `"state_c"` in its input dict (docs/allennlp.md).

    Args:
        options_file: str. The biLM's options: a path or URL of a bilm-tf `options.json`, or,
            with `weight_file=None`, a preset name (`"original"`, `"small"`, `"tiny"`, ...) or
            a model folder (see `BiLM.from_preset`).
        weight_file: str or None. The hdf5 weight file (bilm-tf layout): a path or a URL.
        num_output_representations: int. The number of independent mixes.
        requires_grad: bool. Whether the biLM's weights are fine-tuned (they require gradients
            and are in `parameters()`; otherwise they are frozen). Defaults to `False`.
        do_layer_norm: bool. Masked layer normalisation of every layer before mixing.
            Defaults to `False`.
        dropout: float. Dropout on each representation in training mode. Defaults to `0.5`.
        vocab_to_cache: list of str or None. Words whose char CNN vectors are computed once, at
            construction; `forward` then takes their indices as `word_inputs` (index 0 is
            padding). Defaults to `None`.
        keep_sentence_boundaries: bool. Keep the `<S>` and `</S>` positions in the outputs
            and the mask (`tokens + 2` positions). Defaults to `False`.
        scalar_mix_parameters: list of `n_layers + 1` floats or None. Fixed pre-softmax mix
            weights, not trained (`[-9e10, 1, -9e10]`: the first LSTM layer only). Defaults to
            `None` (learned, from an even mix).

    Call arguments:
        inputs: int tensor `[batch, tokens, 50]` of character ids (from `batch_to_ids`), or
            with more leading dimensions `[..., tokens, 50]`.
        word_inputs: optional int tensor `[batch, tokens]` of indices into `vocab_to_cache`
            (used only with a cache; an index outside it falls back to `inputs`, as
            AllenNLP's does).

    Returns:
        A dict: `"elmo_representations"`, a list of `num_output_representations` float32
        tensors `[batch, tokens, 2 * projection_dim]` (zeros at padding unless
        `keep_sentence_boundaries` and `do_layer_norm`), and `"mask"`, a bool tensor
        `[batch, tokens]`; `tokens + 2` positions with `keep_sentence_boundaries`.

    Example:
    >>> elmo = Elmo("tiny", None, num_output_representations=1, dropout=0.0)
    >>> out = elmo(batch_to_ids([["The", "bank", "."], ["Hi"]]))
    >>> tuple(out["elmo_representations"][0].shape), out["mask"].dtype
    ((2, 3, 32), torch.bool)

    Reference:
        [Peters et al., 2018](https://arxiv.org/abs/1802.05365); AllenNLP's
        `allennlp/modules/elmo.py`.
    """

    def __init__(
        self,
        options_file,
        weight_file,
        num_output_representations,
        requires_grad=False,
        do_layer_norm=False,
        dropout=0.5,
        vocab_to_cache=None,
        keep_sentence_boundaries=False,
        scalar_mix_parameters=None,
    ):
        super().__init__()
        self.num_output_representations = check_int(
            "num_output_representations", num_output_representations
        )
        dropout = check_number("dropout", dropout, 0.0, 1.0)
        self.requires_grad = bool(requires_grad)
        self.do_layer_norm = bool(do_layer_norm)
        self.keep_sentence_boundaries = bool(keep_sentence_boundaries)
        self.vocab_to_cache = check_vocab_to_cache(vocab_to_cache)
        self.bilm = load_bilm(options_file, weight_file)
        set_bilm_trainable(self.bilm, self.requires_grad)
        n_mixed = self.bilm.n_layers + 1
        self.scalar_mix_parameters = check_mix_parameters(scalar_mix_parameters, n_mixed)
        self.word_vectors = None
        if self.vocab_to_cache is not None:
            vectors = cached_word_vectors(self.bilm.char_cnn, self.vocab_to_cache)
            self.word_vectors = torch.nn.Parameter(
                torch.from_numpy(vectors), requires_grad=self.requires_grad
            )
        self._dropout = torch.nn.Dropout(p=dropout)
        self.scalar_mixes = []
        for k in range(self.num_output_representations):
            mix = ScalarMix(
                n_mixed,
                do_layer_norm=self.do_layer_norm,
                initial_scalar_weights=self.scalar_mix_parameters,
                trainable=self.scalar_mix_parameters is None,
                layer_norm_epsilon=ALLENNLP_LAYER_NORM_EPSILON,
                name=f"scalar_mix_{k}",
            )
            mix.build()
            self.add_module(f"scalar_mix_{k}", mix)  # AllenNLP's module names
            self.scalar_mixes.append(mix)

    def get_output_dim(self):
        """The size of each representation: `2 * projection_dim`."""
        return 2 * self.bilm.projection_dim

    def _bilm_inputs(self, char_ids, word_inputs):
        """Cached vectors for `word_inputs` when there is a cache and every index is in it,
        else the character ids (AllenNLP backs off to the char CNN the same way)."""
        if word_inputs is None:
            return char_ids
        if self.word_vectors is None:
            logger.warning("Word inputs were passed to ELMo but it does not have a cached vocab.")
            return char_ids
        word_ids = word_inputs.reshape(-1, word_inputs.shape[-1])
        if word_ids.numel() and (word_ids.min() < 0 or word_ids.max() >= len(self.word_vectors)):
            return char_ids
        return cached_word_inputs(word_ids, self.word_vectors)

    def forward(self, inputs, word_inputs=None):
        leading = tuple(inputs.shape[:-2])
        char_ids = inputs.reshape(-1, *inputs.shape[-2:])
        if word_inputs is not None and self.word_vectors is not None:
            leading = tuple(word_inputs.shape[:-1])
        with keras.device(str(char_ids.device)):
            outputs = self.bilm(
                self._bilm_inputs(char_ids, word_inputs),
                # The differentiable path when the biLM is fine-tuned (it has no dropout).
                training=self.requires_grad and torch.is_grad_enabled(),
                keep_sentence_boundaries=True,  # the mixes' statistics include <S> and </S>
            )
            activations, mask = outputs["activations"], outputs["mask"]
            if not self.keep_sentence_boundaries:
                lengths = mask.sum(dim=1) - 2
                steps = torch.arange(mask.shape[1] - 2, device=mask.device)
                mask_without = steps[None, :] < lengths[:, None]
            representations = []
            for mix in self.scalar_mixes:
                mixed = mix(activations, mask=mask)
                if not self.keep_sentence_boundaries:
                    mixed = mixed[:, 1:-1] * mask_without[:, :, None].to(mixed.dtype)
                representations.append(self._dropout(mixed))
        if not self.keep_sentence_boundaries:
            mask = mask_without
        return {
            "elmo_representations": [r.reshape(*leading, *r.shape[1:]) for r in representations],
            "mask": mask.reshape(*leading, mask.shape[-1]),
        }
