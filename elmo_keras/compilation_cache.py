"""JAX's persistent compilation cache in the user's cache folder, so that a second process does
not compile the biLM's programs again.

On JAX every batch shape is one XLA program, and compiling the published biLM's takes seconds
to tens of seconds on a CPU. `enable` points JAX's persistent cache at
`<cache>/jax-compilation` (`<cache>`: `$ELMO_KERAS_CACHE`, else `~/.cache/elmo-keras`, as the
downloads), created 0700 and checked as the download cache's folders are
(`elmo_keras.file_io.cache_folder`). `$ELMO_KERAS_JAX_CACHE` overrides it: a folder to use instead,
or `off` (also `0`, `false`, `no`, `none`) for no persistent cache. A cache folder the user
gave JAX already (`jax_compilation_cache_dir`, e.g. `$JAX_COMPILATION_CACHE_DIR`) is kept.
Every program is kept, however fast it compiled (`MIN_COMPILE_SECONDS`, unless the user set
`jax_persistent_cache_min_compile_time_secs`): loading a model on JAX runs dozens of small
ones, and a second `elmo-keras embed --backend jax --preset mini_en` of 100 lines loaded in 5 s
instead of 50 s and embedded in 15 s instead of 90 s (a CPU at a load average of 15).

`elmo_keras.models.BiLMEmbedder` calls it on JAX, `elmo-keras embed --backend jax` before it
loads the model, and `JaxTrainer` before it makes its model (a resumed run loads its compiled
step). Nothing here imports jax before `enable` is called.
"""

import os
import pathlib

from elmo_keras.file_io.cache_folder import CacheFolder
from elmo_keras.file_io.download import default_cache_dir

ENVIRONMENT_VARIABLE = "ELMO_KERAS_JAX_CACHE"
FOLDER = "jax-compilation"
_OFF = ("off", "0", "false", "no", "none")
_JAX_DEFAULT_MIN_SECONDS = 1.0  # jax_persistent_cache_min_compile_time_secs unless changed
MIN_COMPILE_SECONDS = 0.0


def cache_dir():
    """The folder the persistent cache goes to, or `None` when `$ELMO_KERAS_JAX_CACHE` turns it
    off."""
    setting = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if setting.lower() in _OFF:
        return None
    if setting:
        return pathlib.Path(setting).expanduser()
    return default_cache_dir() / FOLDER


def enable():
    """Points JAX's persistent compilation cache at `cache_dir()` unless the user chose a
    folder already; returns the folder in use, or `None` (turned off, or the folder could not
    be made: then JAX compiles as before, in memory only)."""
    import jax  # noqa: PLC0415  (JAX only)

    chosen = jax.config.jax_compilation_cache_dir
    if chosen:
        return pathlib.Path(chosen)
    folder = cache_dir()
    if folder is None:
        return None
    try:
        with CacheFolder(folder.parent, (folder.name,)) as checked:
            path = checked.path
    except OSError:  # read-only home, a planted link (PermissionError): no persistent cache
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    if jax.config.jax_persistent_cache_min_compile_time_secs == _JAX_DEFAULT_MIN_SECONDS:
        # Loading a model on JAX runs dozens of small programs (initializers, casts), each
        # compiled in well under JAX's default second: kept too, they load in milliseconds.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return pathlib.Path(path)
