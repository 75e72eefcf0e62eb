"""What tells a training file apart from its earlier self, and `ChangedFileError`: a file that
changed (rewritten, cut short, replaced or removed) while the run read it by byte offsets."""

import os


def signature(status):
    """What tells a file apart from its earlier self: device, inode, size, modification time."""
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


class ChangedFileError(ValueError):
    """A training file changed (rewritten, cut short, replaced or removed) while the whole-text
    shuffle read it by the byte offsets of its lines."""


def changed(path, before):
    """`None` if `path` is still the file of signature `before`, else what changed, in words."""
    try:
        now = signature(os.stat(path))
    except FileNotFoundError:
        return "it was removed"
    if now[:2] != before[:2]:
        return "it was replaced by another file"
    if now[2] != before[2]:
        return f"its size went from {before[2]} to {now[2]} bytes"
    if now[3] != before[3]:
        return "it was rewritten (a new modification time)"
    return None
