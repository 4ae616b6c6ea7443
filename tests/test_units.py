"""archlint/units.py: the one number wording every output uses."""

from __future__ import annotations

import pytest

from archlint.units import significant


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (636.4, "636"),
        (6.364, "6.36"),
        (0.001234, "0.00123"),
        (12934.0, "12,934"),
        (12.0, "12"),
        (0.0, "0"),
    ],
)
def test_significant_digits_never_scientific(value, text):
    assert significant(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.07812, "0.0781"),
        (12.4, "12.4"),
        (12.0, "12.0"),
        (0.5, "0.500"),
        (636.4, "636"),
        (2280.4, "2280"),
        (99.94, "99.9"),
        (99.96, "100"),
        (-12.34, "-12.3"),
        (1e-12, "0.000000000"),
        (float("inf"), "inf"),
    ],
)
def test_fixed_keeps_one_format_for_a_column(value, text):
    assert significant(value, fixed=True) == text


@pytest.mark.parametrize(("value", "text"), [(9.996, "10.0"), (0.9996, "1.00"), (0.09996, "0.100")])
def test_fixed_rounding_up_a_digit_keeps_three_significant_digits(value, text):
    # units.milliseconds (which this replaced) wrote "10.00": four digits where every other row has three
    assert significant(value, fixed=True) == text
