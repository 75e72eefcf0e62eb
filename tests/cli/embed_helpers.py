"""Helpers shared by the `elmo-keras embed` tests (a uniquely named module, as conftest is not)."""

import h5py

SENTENCES = [
    "The bank raised its interest rates .",
    "",
    "She sat on the bank of the river and watched the water flow past slowly .",
    "Hello",
    "A b c d",
]


def read(path):
    """`{dataset name: array}` of an hdf5 file."""
    with h5py.File(path, "r") as f:
        return {k: f[k][...] for k in f}


def one_error_line(capsys):
    """The one line on stderr (asserted to be one)."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]
