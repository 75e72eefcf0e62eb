"""A set of files switched into a folder as one change: never read as a mix of two sets.

A model's options, weights, vocabulary and softmax belong together, and no file system renames
four files in one step. `switch_files` first renames the complete set's folder into the target
folder as `.files.next` (one atomic step: from then on the new set is the one that counts), then
renames each file out of it. A SIGKILL between two renames leaves the rest in `.files.next`;
`finish_switch` moves them in (every writer calls it first) and `settle_folder` does so for a
reader, before anything is read. Both hold the folder's `folder_lock` (`.files.lock` inside
it, so that writing a folder's files needs no right on its parent), as writers do.

Plain Python (no TensorFlow).
"""

import os
import pathlib
import stat

from elmo_keras.file_io.files import deferred_signals
from elmo_keras.file_io.output_access import exclusive_lock

SWITCH_LOCK = ".files.lock"
SWITCH_FOLDER = ".files.next"  # a complete set of files being moved into its folder


def folder_lock(folder):
    """An exclusive lock on `folder`'s set of files (`output_access.exclusive_lock` on
    `folder/.files.lock`, removed afterwards).

    Raises:
        BlockingIOError: another writer holds it; the message names `folder` and the holder.
    """
    return exclusive_lock(
        pathlib.Path(folder) / SWITCH_LOCK,
        lambda holder: f"{folder}'s files are being written by another run ({holder})",
    )


def switch_files(staging, folder):
    """Moves every file of the complete folder `staging` (in `folder`) into `folder` as one
    change (see the module docstring): a cut-short switch of an earlier writer is finished
    first. The caller holds `folder_lock(folder)`; signals wait."""
    folder = pathlib.Path(folder)
    finish_switch(folder)
    pending = folder / SWITCH_FOLDER
    with deferred_signals():
        os.replace(staging, pending)
        _move_out(pending, folder)


def _move_out(pending, folder):
    for entry in sorted(os.scandir(pending), key=lambda e: e.name):
        if not entry.is_file(follow_symlinks=False):
            raise OSError(f"{entry.path} is not a regular file; it is not moved into {folder}")
        os.replace(entry.path, folder / entry.name)
    pending.rmdir()


def finish_switch(folder):
    """Finishes a `switch_files` into `folder` that a SIGKILL cut short: the files still in
    `folder/.files.next` are moved in. The caller holds `folder_lock(folder)`. Returns whether
    there was one to finish.

    Raises:
        OSError: `.files.next` is a link, not a folder, another user's, or cannot be emptied.
    """
    folder = pathlib.Path(folder)
    pending = folder / SWITCH_FOLDER
    try:
        info = os.lstat(pending)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(
            f"{pending} (the files of a write that was cut short) is not a folder of this "
            "user's; remove it by hand"
        )
    with deferred_signals():
        _move_out(pending, folder)
    return True


def settle_folder(folder):
    """For a reader of a model folder: finishes a `switch_files` a SIGKILL cut short (under the
    folder's lock) before anything is read, so that no mix of two sets is read.

    Raises:
        ValueError: one line: a live writer holds the folder, or the switch cannot be finished
            (no permission: the folder is someone else's).
    """
    folder = pathlib.Path(folder)
    if not os.path.lexists(folder / SWITCH_FOLDER):
        return
    try:
        with folder_lock(folder):
            finish_switch(folder)
    except BlockingIOError as error:
        raise ValueError(f"{error}; wait for it to end") from None
    except OSError as error:
        raise ValueError(
            f"{folder} holds the files of a write that was cut short ({folder / SWITCH_FOLDER}) "
            f"and they cannot be moved in here: {error.strerror or error}; run the command that "
            "wrote them again"
        ) from None
