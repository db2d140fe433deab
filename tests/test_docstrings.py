"""Parameter descriptions read from Google, NumPy and Sphinx docstrings."""

from __future__ import annotations

from mcpcore._app.docstrings import parse


def test_google_style_with_types_nested_parentheses_and_continuation_lines() -> None:
    doc = "Get the weather.\n\nArgs:\n    city (str): The city,\n        in full.\n    pair (tuple(int, int)): A pair.\n" \
          "    days: How many days.\n\nReturns:\n    The forecast."
    text, params = parse(doc)
    assert params == {"city": "The city, in full.", "pair": "A pair.", "days": "How many days."}
    assert text == "Get the weather.\n\nReturns:\n    The forecast."


def test_numpy_style_with_several_names_and_prose_after_the_section() -> None:
    doc = "Move.\n\nParameters\n----------\nx, y : int\n    Where to.\nfast : bool, optional\n    Hurry.\n\n" \
          "This paragraph stays.\n\nReturns\n-------\nstr\n    Done."
    text, params = parse(doc)
    assert params == {"x": "Where to.", "y": "Where to.", "fast": "Hurry."}
    assert text == "Move.\n\nThis paragraph stays.\n\nReturns\n-------\nstr\n    Done."


def test_sphinx_style_and_a_docstring_without_parameters() -> None:
    text, params = parse("Get it.\n\n:param city: The city.\n:param int days: How many\n    days.\n:returns: it")
    assert (text, params) == ("Get it.", {"city": "The city.", "days": "How many days."})
    assert parse("Just a sentence.") == ("Just a sentence.", {})
    assert parse(None) == (None, {})
