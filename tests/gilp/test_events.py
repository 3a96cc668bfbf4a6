"""GILP's event schema is declared once (`events.SCHEMA`): the docs table follows from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bsjax.gilp import events
from gilp.synthetic import event_row

DOC = Path(__file__).resolve().parents[2] / "docs" / "gilp" / "events.md"


def test_the_docs_table_is_the_schema():
    text = DOC.read_text()
    table = re.search(r"<!-- schema:start -->\n(.*)<!-- schema:end -->", text, re.S).group(1)
    assert table == events.schema_table(), "regenerate docs/gilp/events.md from schema_table()"


def test_the_schema_names_each_key_once_required_keys_first():
    names = [f.name for f in events.SCHEMA]
    assert len(names) == len(set(names))
    # The files' key order: every required key before the optional ones.
    assert all(f.required for f in events.SCHEMA[:len(events.FIELDS)])
    assert events.validate_row(event_row()) is not None


@pytest.mark.parametrize("field", events.SCHEMA, ids=lambda f: f.name)
def test_validation_follows_the_schema(field):
    """A required key missing, or any key of the wrong kind, is refused by name."""
    if field.required:
        row = event_row()
        del row[field.name]
        with pytest.raises(events.EventError, match=field.name):
            events.validate_row(row)
    with pytest.raises(events.EventError, match=field.name):
        events.validate_row({**event_row(), field.name: {"not": "valid"}})
