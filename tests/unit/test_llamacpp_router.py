"""A llama-server router's own bodies (tests/data/llamacpp-11434/router-*, served by the real router)
read as its models, their states and their children's ports; hostile bodies read without a crash, or
refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui.engines.llamacpp.router import (
    MAX_MODELS,
    ModelState,
    RouterModel,
    is_router,
    read_router_models,
)
from sparktui.engines.llamacpp.scrape import read_props
from sparktui.model.safe_text import LABEL_LIMIT
from sparktui.model.scrape import ScrapeProblem

DATA = Path(__file__).resolve().parents[1] / "data" / "llamacpp-11434"


def body(name: str) -> bytes:
    return (DATA / name).read_bytes()


def served_port(name: str, model: str) -> int:
    """The port in the ``--port`` of ``model``'s args, as the saved body has it."""
    (card,) = [card for card in json.loads(body(name))["data"] if card["id"] == model]
    args = card["status"]["args"]
    return int(args[args.index("--port") + 1])


def card(model_id: object = "m", value: object = "loaded", args: object = None, **status: object) -> dict[str, object]:
    return {
        "id": model_id,
        "status": {"value": value, "args": ["llama-server", "--port", "41000"] if args is None else args, **status},
    }


def models_body(*cards: object) -> bytes:
    return json.dumps({"data": list(cards), "object": "list"}).encode()


def only(*cards: object) -> RouterModel:
    (model,) = read_router_models(models_body(*cards)).models
    return model


def test_a_router_says_so_in_its_props_and_a_single_server_does_not() -> None:
    assert is_router(body("router-props.json"))
    assert not is_router(body("router-child-props.json"))  # a child is a single server
    assert not is_router(body("idle-props.json"))


@pytest.mark.parametrize("props", [b"", b"not json", b"[]", b'{"role": 1}', b'{"role": "Router"}', b'"router"'])
def test_props_that_are_not_a_routers_are_not_a_router(props: bytes) -> None:
    assert not is_router(props)


def test_every_model_is_unloaded_with_no_port_after_the_start() -> None:
    read = read_router_models(body("router-models-unloaded.json"))
    assert [(model.id, model.state, model.port) for model in read.models] == [
        ("a", ModelState.UNLOADED, None),
        ("b", ModelState.UNLOADED, None),
        ("bad", ModelState.UNLOADED, None),
    ]
    assert read.children == () and read.left_out == 0


def test_a_loading_model_has_no_port_yet_its_child_does_not_answer() -> None:
    states = {
        model.id: (model.state, model.port) for model in read_router_models(body("router-models-loading.json")).models
    }
    assert states == {
        "a": (ModelState.LOADING, None),
        "b": (ModelState.UNLOADED, None),
        "bad": (ModelState.UNLOADED, None),
    }


@pytest.mark.parametrize(("name", "state"), [("loaded", ModelState.LOADED), ("sleeping", ModelState.SLEEPING)])
def test_a_loaded_or_sleeping_model_has_its_childs_port(name: str, state: ModelState) -> None:
    read = read_router_models(body(f"router-models-{name}.json"))
    (child,) = read.children
    assert (child.id, child.state, child.port) == ("a", state, served_port(f"router-models-{name}.json", "a"))
    assert [model.state for model in read.models if model.id != "a"] == [ModelState.UNLOADED, ModelState.UNLOADED]


def test_the_childs_props_are_a_single_servers_props() -> None:
    props = read_props(body("router-child-props.json"))
    assert (props.total_slots, props.n_ctx, props.sleeping) == (2, 2048, False)


def test_a_model_whose_child_failed_is_failed_and_an_unloaded_ones_stale_port_is_not_given() -> None:
    name = "router-models-failed.json"
    assert served_port(name, "a") != 0  # the port of a's last child, still in its args
    states = {model.id: (model.state, model.port, model.exit_code) for model in read_router_models(body(name)).models}
    assert states == {
        "a": (ModelState.UNLOADED, None, None),
        "b": (ModelState.UNLOADED, None, None),
        "bad": (ModelState.FAILED, None, 1),
    }


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"not json",
        b"[]",
        b"{}",
        b'{"data": {}}',
        b'{"data": "a"}',
        b'{"data": ' + b"[" * 100 + b"]" * 100 + b"}",
        b'{"data": [NaN]}',
    ],
)
def test_a_body_that_is_not_the_model_list_is_one_line(bad: bytes) -> None:
    with pytest.raises(ScrapeProblem) as caught:
        read_router_models(bad)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("/v1/models:")


def test_entries_that_are_not_models_are_skipped() -> None:
    read = read_router_models(
        models_body(1, "a", None, [], {"id": 5}, {"id": ""}, {"id": "  "}, {"status": {}}, card("ok"))
    )
    assert [model.id for model in read.models] == ["ok"]


@pytest.mark.parametrize(
    "status",
    [None, [], "loaded", {"value": None}, {"value": 1}, {"value": "Loaded"}, {"value": "downloading"}, {}],
)
def test_a_status_that_is_not_one_served_is_unknown_with_no_port(status: object) -> None:
    model = only({"id": "m", "status": status})
    assert (model.state, model.port) == (ModelState.UNKNOWN, None)


@pytest.mark.parametrize(
    "args",
    [
        None,
        "--port 41000",
        {"--port": "41000"},
        [],
        ["--port"],
        ["--port", 41000],
        ["--port", "0"],
        ["--port", "65536"],
        ["--port", "-1"],
        ["--port", "+80"],
        ["--port", " 80"],
        ["--port", "8O"],
        ["--port", "٨٠"],  # Arabic-Indic digits: decimal to Python, not to a socket
        ["--port", "1" * 400],
        ["--port", "41000", "--port", "41001"],  # which one the child took is not known
        ["--port=41000"],
        ["-p", "41000"],
    ],
)
def test_a_loaded_model_without_one_sane_port_has_none(args: object) -> None:
    model = only({"id": "m", "status": {"value": "loaded", "args": args}})
    assert (model.state, model.port) == (ModelState.LOADED, None)


def test_a_port_is_read_from_its_flag_wherever_it_is_and_the_host_in_the_args_is_ignored() -> None:
    model = only(card(args=["llama-server", "--host", "203.0.113.9", "--alias", "m", "--port", "65535"]))
    assert model.port == 65535
    assert not hasattr(model, "host")


def test_the_failed_flag_counts_only_on_an_unloaded_model_and_a_wrong_exit_code_is_unknown() -> None:
    assert only(card(value="loaded", failed=True)).state is ModelState.LOADED
    assert only(card(value="unloaded", failed="yes")).state is ModelState.UNLOADED
    failed = only(card(value="unloaded", failed=True, exit_code="1"))
    assert (failed.state, failed.exit_code, failed.port) == (ModelState.FAILED, None, None)
    assert only(card(value="unloaded", failed=True, exit_code=10**30)).exit_code is None


def test_ids_are_made_safe_and_a_model_listed_twice_is_kept_once() -> None:
    read = read_router_models(
        models_body(card("\x1b[31mred\x1b[0m\nmodel"), card("x" * 5000), card("dup", args=["--port", "1"]), card("dup"))
    )
    ids = [model.id for model in read.models]
    assert "\x1b" not in ids[0] and "\n" not in ids[0]
    assert len(ids[1]) <= LABEL_LIMIT
    assert ids[2:] == ["dup"] and read.models[2].port == 1


def test_at_most_max_models_are_kept_those_with_a_child_first_and_the_rest_counted() -> None:
    unloaded = [card(f"u{index}", value="unloaded") for index in range(MAX_MODELS + 10)]
    loaded = card("last", value="loaded")
    read = read_router_models(models_body(*unloaded, loaded))
    assert len(read.models) == MAX_MODELS and read.left_out == 11
    assert read.models[-1].id == "last" and read.children == (read.models[-1],)
    assert [model.id for model in read.models[:-1]] == [f"u{index}" for index in range(MAX_MODELS - 1)]
