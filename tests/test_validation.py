"""The shared argument checks: messages name the argument, the expectation and the value."""

import warnings

import pytest

from elmo_keras.validation import (
    check_choice,
    check_int,
    check_number,
    renamed_argument,
    renamed_attribute,
)


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True, None])
def test_check_int_refuses(value):
    with pytest.raises(ValueError, match=rf"`n` must be an integer >= 1. Received: n={value!r}"):
        check_int("n", value)


def test_check_int_bounds():
    assert check_int("n", 0, minimum=0) == 0
    with pytest.raises(ValueError, match=r"`n` must be an integer in \[1, 3\]. Received: n=4"):
        check_int("n", 4, maximum=3)


@pytest.mark.parametrize("value", [1.0, -0.1, float("nan"), "0.5", True])
def test_check_number_refuses(value):
    with pytest.raises(ValueError, match=r"`rate` must be a number in \[0, 1\)"):
        check_number("rate", value, 0.0, 1.0, include_maximum=False)


def test_check_number_and_choice_accept():
    assert check_number("rate", 0, 0.0, 1.0, include_maximum=False) == 0.0
    assert check_choice("mode", "a", ("a", "b")) == "a"
    with pytest.raises(ValueError, match=r"`mode` must be one of \('a', 'b'\). Received: mode='c'"):
        check_choice("mode", "c", ("a", "b"))


def test_renamed_argument_warns_and_refuses_conflicts():
    kwargs = {"units": 8}
    with pytest.warns(DeprecationWarning, match=r"`Layer\(units=...\)` is deprecated; use"):
        assert renamed_argument(kwargs, "units", "lstm_units", None, None, "Layer") == 8
    assert kwargs == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert renamed_argument({}, "units", "lstm_units", 4, None, "Layer") == 4
    with pytest.raises(ValueError, match="got both `lstm_units` and its old name `units`"):
        renamed_argument({"units": 8}, "units", "lstm_units", 4, None, "Layer")


def test_renamed_attribute_warns():
    class Thing:
        new = 3
        old = renamed_attribute("old", "new")

    with pytest.warns(DeprecationWarning, match=r"`Thing.old` is deprecated; use `.new`"):
        assert Thing().old == 3
