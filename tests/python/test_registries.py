"""The SDK's lists checked against the crate's registries, so a second list cannot drift."""

from __future__ import annotations

import json
from dataclasses import fields

from wasmsand import Limits, _native
from wasmsand._types import _wire


def test_limits_fields_are_the_registry() -> None:
    specs = json.loads(_native.limit_specs())
    assert {f.name for f in fields(Limits)} == {s["name"] for s in specs}
    for s in specs:
        assert _wire(s["name"]) == s["wire"], s
    # Every limit reaches the wire under its registry name.
    everything = Limits(**{s["name"]: s["default"] for s in specs})
    assert everything.to_wire() == {s["wire"]: s["default"] for s in specs}
