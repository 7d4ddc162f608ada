"""Walking a Catalyst tree (a plan or an expression) held in the JVM, without recursion: a plan
is user input of any depth."""

from __future__ import annotations

from typing import Any


def nodes(root: Any) -> list[Any]:
    """Every node under ``root`` (``TreeNode.children``), in pre-order, left to right (a plan's
    sources in the order Spark numbers them)."""
    out, todo = [], [root]
    while todo:
        node = todo.pop()
        out.append(node)
        children = node.children()
        todo.extend(children.apply(i) for i in range(children.size() - 1, -1, -1))
    return out
