"""Routes get what they use one way: as their factory's arguments (`router(service, ...)`),
built by `create_app`. None looks the app's state up on the request it handles, which
would hide its dependencies from its signature and from the app's wiring."""

from __future__ import annotations

import ast
from pathlib import Path

import oai_server

PACKAGE = Path(oai_server.__file__).parent
# The app sets its state; the command line reads the lifecycle from it to serve the app.
SETS_OR_SERVES = {PACKAGE / "app.py", PACKAGE / "__main__.py"}


def _reads_of_the_app_state(tree: ast.AST) -> list[int]:
    """The lines where `<anything>.app.state` is read."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "state"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "app"
    ]


def test_no_module_of_the_server_reads_the_app_state_off_a_request() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in SETS_OR_SERVES:
            continue
        lines = _reads_of_the_app_state(ast.parse(path.read_text(), str(path)))
        if lines:
            found[str(path.relative_to(PACKAGE))] = lines
    assert found == {}, f"read the app's state instead of taking it as an argument: {found}"


def test_the_check_sees_a_handler_that_reads_the_app_state() -> None:
    handler = "async def h(request):\n    return request.app.state.server.settings\n"
    assert _reads_of_the_app_state(ast.parse(handler)) == [2]
