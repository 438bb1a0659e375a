"""Docstrings in Google, NumPy and Sphinx style: every parameter found, no section in the
description."""

from __future__ import annotations

from nbagent import tool
from nbagent._schema import parse_docstring


def test_numpy_parameters_separated_by_blank_lines() -> None:
    doc = """Find flights.

    Parameters
    ----------
    origin : str
        Departure.

        Three letters.

    destination : str
        Arrival.
    """
    assert parse_docstring(doc) == (
        "Find flights.",
        {"origin": "Departure. Three letters.", "destination": "Arrival."},
    )


def test_numpy_several_names_on_one_line() -> None:
    doc = """Find.

    Parameters
    ----------
    x, y : float
        Coordinates.
    """
    assert parse_docstring(doc)[1] == {"x": "Coordinates.", "y": "Coordinates."}


def test_numpy_next_section_without_a_blank_line_is_not_a_parameter() -> None:
    doc = """Find.

    Parameters
    ----------
    origin : str
        Departure.
    Returns
    -------
    str
        The flight.
    """
    assert parse_docstring(doc) == ("Find.", {"origin": "Departure."})


def test_numpy_references_and_other_sections_stay_out_of_the_description() -> None:
    doc = """Find flights.

    References
    ----------
    .. [1] Some paper.

    Examples
    --------
    >>> find()
    """
    assert parse_docstring(doc) == ("Find flights.", {})


def test_numpy_other_parameters() -> None:
    doc = """Find.

    Parameters
    ----------
    origin : str
        Departure.

    Other Parameters
    ----------------
    debug : bool
        Print more.
    """
    assert parse_docstring(doc)[1] == {"origin": "Departure.", "debug": "Print more."}


def test_sphinx_aliases_of_param() -> None:
    doc = """Find.

    :arg origin: Departure.
    :argument via: Stopover.
    :parameter destination: Arrival.
    :key when: Date.
    :keyword seats: How many.
    :param str mode: Mode.
    :type mode: str
    :returns: the flight
    """
    assert parse_docstring(doc) == (
        "Find.",
        {
            "origin": "Departure.",
            "via": "Stopover.",
            "destination": "Arrival.",
            "when": "Date.",
            "seats": "How many.",
            "mode": "Mode.",
        },
    )


def test_google_other_parameters() -> None:
    doc = """Find.

    Args:
        origin: Departure.

    Other Parameters:
        debug: Print more.
    """
    assert parse_docstring(doc) == ("Find.", {"origin": "Departure.", "debug": "Print more."})


def test_the_descriptions_reach_the_schema() -> None:
    def locate(x: float, y: float, debug: bool = False) -> str:
        """Locate a point.

        Parameters
        ----------
        x, y : float
            Coordinates.

        debug : bool
            Print more.

        References
        ----------
        .. [1] A paper.
        """
        return ""

    t = tool(locate)
    assert t.description == "Locate a point."
    props = t.input_schema["properties"]
    assert [props[k]["description"] for k in ("x", "y", "debug")] == [
        "Coordinates.",
        "Coordinates.",
        "Print more.",
    ]
