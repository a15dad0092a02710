"""The JSON Schema of ``sparktui snapshot --json`` and ``sparktui check --json`` (docs/json.md).

Built from the very dataclasses the JSON is written from (``NodeView``, ``ModelReplicas``), by
pydantic, so it cannot drift from the output: ``to_jsonable`` writes a dataclass's fields, its
``JSON_PROPERTIES``, enums as their values, and NaN or infinity as null; the schema says the same.
``SCHEMA_VERSION`` goes up when a field is removed, renamed or changes its type; new fields do not
change it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

from sparktui.headless.snapshot import JSON_SCHEMA_VERSION
from sparktui.model.fleet import NodeView
from sparktui.model.replicas import ModelReplicas

SCHEMA_VERSION = JSON_SCHEMA_VERSION
SCHEMA_ID = "https://sparktui.invalid/schema/snapshot-v1.json"  # an identifier, not a place to fetch


def _properties_of(cls: type) -> dict[str, Any]:
    """The schemas of a dataclass's ``JSON_PROPERTIES`` (computed values written beside its fields)."""
    from pydantic import TypeAdapter

    out: dict[str, Any] = {}
    for name in getattr(cls, "JSON_PROPERTIES", ()):
        prop = getattr(cls, name)
        hints = typing.get_type_hints(prop.fget)
        out[name] = TypeAdapter(hints["return"]).json_schema(mode="serialization")
    return out


def _dataclasses_in(root: type) -> dict[str, type]:
    """Every dataclass reachable from ``root``'s field types, by name."""
    found: dict[str, type] = {}
    todo: list[object] = [root]
    while todo:
        hint = todo.pop()
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            if hint.__name__ in found:
                continue
            found[hint.__name__] = hint
            todo.extend(typing.get_type_hints(hint).values())
        else:
            todo.extend(typing.get_args(hint))
    return found


def _nullable_numbers(node: object) -> object:
    """``{"type": "number"}`` becomes number or null: a value that is not finite is written null."""
    if isinstance(node, Mapping):
        out = {key: _nullable_numbers(value) for key, value in node.items()}
        if out.get("type") == "number":
            out["type"] = ["number", "null"]
        return out
    if isinstance(node, list):
        return [_nullable_numbers(item) for item in node]
    return node


def snapshot_schema() -> dict[str, Any]:
    from pydantic import TypeAdapter

    nodes = TypeAdapter(list[NodeView]).json_schema(mode="serialization", ref_template="#/$defs/{model}")
    replicas = TypeAdapter(list[ModelReplicas]).json_schema(mode="serialization", ref_template="#/$defs/{model}")
    defs: dict[str, Any] = {**nodes.pop("$defs", {}), **replicas.pop("$defs", {})}
    for root in (NodeView, ModelReplicas):
        for name, cls in _dataclasses_in(root).items():
            extra = _properties_of(cls)
            if extra and name in defs:
                defs[name]["properties"].update(extra)
                defs[name].setdefault("required", []).extend(extra)
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "sparktui snapshot --json / check --json",
        "type": "object",
        "properties": {
            "schema_version": {"const": SCHEMA_VERSION, "description": "changes when a field is removed or retyped"},
            "sparktui": {"type": "string", "description": "the version of sparktui that wrote it"},
            "nodes": nodes,
            "replicas": replicas,
            "exit_code": {"type": "integer", "description": "check --json only: its exit status"},
        },
        "required": ["schema_version", "sparktui", "nodes", "replicas"],
        "$defs": defs,
    }
    return typing.cast(dict[str, Any], _nullable_numbers(schema))
