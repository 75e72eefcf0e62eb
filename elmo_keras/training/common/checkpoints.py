"""A run's checkpoint files: the newest readable one, orphaned temporary folders, write failures.

`tf.train.CheckpointManager` writes `ckpt-N` into a `ckpt-N_temp/` folder, renames the files
into place, then updates the `checkpoint` state file. A process killed during a save leaves the
folder behind (`remove_orphans` deletes it at the start of `fit` and after every save); a
damaged, truncated or missing newest checkpoint makes `restore_newest_readable` fall back to an
older kept one and say why; a failed write (disk full) becomes one `CheckpointWriteError` line
that names the checkpoint to resume from.

The JAX trainer's checkpoints are single `ckpt-N.npz` files (`array_checkpoints`); they are
listed, restored newest-readable-first and named in resume hints here as well. TensorFlow is not
imported by this module.
"""

import numbers
import pathlib
import re
import shutil
import sys

_CHECKPOINT = re.compile(r"^ckpt-(\d+)$")
_TEMPORARY = re.compile(r"^ckpt-\d+_temp$")
_FUNCTION_NODE = re.compile(r"\{\{function_node [^}]*\}\}\s*")
_STATE_PATH = re.compile(r'^(?:all_)?model_checkpoint_paths?:\s*"(.*)"\s*$')


# The largest step a checkpoint may hold: the JAX step function takes the step as an int32 (it
# keys the sampled softmax's candidates); far beyond any run (68 years at 1 step a second).
MAX_STEP = 2**31 - 1


class CheckpointWriteError(OSError):
    """Writing a checkpoint or the model files failed; the message says where to resume from."""


def one_line(error, limit=200):
    """`TypeName: the first line of the message`, shortened (without TensorFlow's
    `{{function_node ...}}` prefix)."""
    text = _FUNCTION_NODE.sub("", str(error)).strip().splitlines()
    text = text[0] if text else ""
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _step(prefix):
    match = _CHECKPOINT.match(pathlib.Path(prefix).name)
    return int(match.group(1)) if match else None


def check_step(step, path):
    """A restored checkpoint's step as an int, checked before the run goes on from it: an
    integer in [0, `MAX_STEP`] (a negative or huge step once surfaced as a "`seed` must be"
    error, or was accepted). Raises a `ValueError` naming the checkpoint and the limit."""
    value = step.item() if hasattr(step, "item") else step
    integer = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not integer or not 0 <= value <= MAX_STEP:
        raise ValueError(
            f"{path} holds step {value!r}; a checkpoint's step is an integer in "
            f"[0, {MAX_STEP:,}] (a damaged or foreign checkpoint)"
        )
    return int(value)


def kept_checkpoints(directory):
    """The prefixes of the checkpoints in `directory`, newest (highest step) first.

    Both the `checkpoint` state file's entries (a listed checkpoint whose files are missing is
    still returned: restoring it fails and says so), every `ckpt-N.index` file and every
    `ckpt-N.npz` file (the JAX trainer's) count.
    """
    directory = pathlib.Path(directory)
    names = {p.name[: -len(".index")] for p in directory.glob("ckpt-*.index")}
    names |= {p.name[: -len(".npz")] for p in directory.glob("ckpt-*.npz")}
    state = directory / "checkpoint"
    try:
        lines = state.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        match = _STATE_PATH.match(line.strip())
        if match:
            names.add(pathlib.Path(match.group(1)).name)
    steps = {name: _step(name) for name in names}
    ordered = sorted((n for n, s in steps.items() if s is not None), key=lambda n: -steps[n])
    return [str(directory / name) for name in ordered]


def remove_orphans(directory):
    """Deletes the `ckpt-N_temp/` folders of interrupted saves in `directory`; returns them."""
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        return []
    removed = []
    for path in sorted(directory.iterdir()):
        if _TEMPORARY.match(path.name) and path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    return removed


def restore_newest_readable(restore, directory):
    """Restores the newest checkpoint of `directory` that can be read.

    Args:
        restore: callable(prefix). Restores one checkpoint; any exception means unreadable.
        directory: path. The run's `checkpoints/` folder.

    Returns:
        `(prefix, skipped)`: the restored prefix (None when there is no checkpoint at all) and
        a list of `(prefix, reason)` for the newer ones that could not be read.

    Raises:
        ValueError: there are checkpoints but none is readable (each one and why).
    """
    skipped = []
    for prefix in kept_checkpoints(directory):
        try:
            restore(prefix)
        except Exception as error:  # noqa: BLE001 - whatever the damage, try the next one
            skipped.append((prefix, one_line(error)))
            continue
        return prefix, skipped
    if skipped:
        reasons = "; ".join(f"{pathlib.Path(p).name} ({why})" for p, why in skipped)
        raise ValueError(f"`resume`: no readable checkpoint in {directory}: {reasons}")
    return None, skipped


def skipped_message(restored, skipped):
    """The one line that says which checkpoints were skipped, why, and where the run goes on."""
    reasons = ", ".join(f"{pathlib.Path(p).name} ({why})" for p, why in skipped)
    return f"resume: skipped unreadable checkpoint {reasons}; resuming from {restored}"


def write_checkpoint(save, directory, step):
    """Runs `save()` (a checkpoint write of `step` into `directory`) and tidies up after it.

    A failed write (disk full, a permission or I/O error) leaves no temporary folder and
    becomes a `CheckpointWriteError` whose one-line message names the newest checkpoint kept,
    from which the run can be resumed.
    """
    errors = (OSError,)
    if "tensorflow" in sys.modules:  # a TensorFlow save reports its failures as OpError
        errors += (sys.modules["tensorflow"].errors.OpError,)
    try:
        path = save()
    except errors as error:
        remove_orphans(directory)
        raise CheckpointWriteError(
            f"could not write checkpoint ckpt-{step} in {directory} ({one_line(error)}); "
            + resume_hint(directory)
        ) from None
    remove_orphans(directory)
    return path


def resume_hint(directory):
    """Where a failed run can go on from: "resume from <newest checkpoint> (`--resume`)"."""
    kept = [
        p
        for p in kept_checkpoints(directory)
        if pathlib.Path(f"{p}.index").is_file() or pathlib.Path(f"{p}.npz").is_file()
    ]
    if not kept:
        return "no checkpoint was kept yet: start the run again"
    return f"resume from {kept[0]} (`--resume`, output {pathlib.Path(directory).parent})"
