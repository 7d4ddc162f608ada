"""Where and how a foreachBatch function writes each batch, read from its code: the
``DataFrameWriter`` calls it makes (``batch_df.write.mode("append").format("parquet")
.save(path)``, ``.json(path)``, ``.saveAsTable(name)``, ``.insertInto(name)``), each with its
save mode, format and target.

A foreachBatch function's digest says that its code changed, not what the change does to the
sink. These facts tell apart the changes Spark's ``DataFrameWriter`` makes visible in the code:
a save mode now ``overwrite`` (each batch replaces what the others wrote), another target
(the batches after the restart go elsewhere) or another format; what each row becomes cannot
be read from the code and is left to the digest.

Values are read without running the user's code: a string literal, a variable the function
closes over, a default argument or a module global holding a string, a plain ``dict`` of
strings subscripted with a literal key, and ``+``, ``%``, f-strings and ``os.path.join`` of
those; the function's batch id argument is written ``<batch_id>``; anything else as its
source text in braces (``{table_name()}``). Spark's ``DataFrameWriter`` defaults: save mode
``errorifexists``, format ``spark.sql.sources.default`` (written ``default``)."""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from collections.abc import Mapping
from typing import Any, NamedTuple

#: ``DataFrameWriter`` methods that write, and the format each one implies.
_TERMINALS = {
    "save": None,
    "saveAsTable": None,
    "insertInto": None,
    "parquet": "parquet",
    "json": "json",
    "csv": "csv",
    "orc": "orc",
    "text": "text",
    "xml": "xml",
    "jdbc": "jdbc",
}
#: The terminals whose first argument names a table, not a folder.
_TABLES = frozenset({"saveAsTable", "insertInto"})
#: Longest value text kept.
_MAX_TEXT = 300


class BatchWrite(NamedTuple):
    """One ``DataFrameWriter`` call of a foreachBatch function."""

    mode: str
    format: str
    #: ``path`` (a folder) or ``table``
    target: str
    where: str


def batch_writes(func: Any) -> tuple[BatchWrite, ...] | None:
    """The writes of ``func``'s code, in the order they appear; ``None`` where its source
    cannot be read (code run by ``exec``, a builtin)."""
    func = getattr(func, "__func__", func)
    if not isinstance(func, types.FunctionType):
        return None
    try:
        source = textwrap.dedent(inspect.getsource(func))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    node = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))), None)
    if node is None:
        return None
    values = _Values(func, node)
    calls = [
        call
        for call in ast.walk(node)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in _TERMINALS
        and _on_writer(call.func.value)
    ]
    calls.sort(key=lambda call: (call.lineno, call.col_offset))
    return tuple(_write(call, values) for call in calls)


def write_facts(writes: tuple[BatchWrite, ...]) -> list[tuple[str, str]]:
    """The sink facts of :func:`batch_writes`: ``write mode``, ``write format``, ``write
    path`` or ``write table`` (numbered ``write 2 ...`` from a second write on)."""
    facts: list[tuple[str, str]] = [("writes", str(len(writes)))]
    for i, w in enumerate(writes):
        prefix = "write" if i == 0 else f"write {i + 1}"
        facts += [
            (f"{prefix} mode", w.mode),
            (f"{prefix} format", w.format),
            (f"{prefix} {w.target}", w.where),
        ]
    return facts


def writes_from_facts(facts: Mapping[str, str]) -> tuple[BatchWrite, ...] | None:
    """:func:`write_facts` read back from a sink's facts; ``None`` where none were recorded."""
    count = facts.get("writes")
    if count is None or not count.isdigit():
        return None
    out = []
    for i in range(int(count)):
        prefix = "write" if i == 0 else f"write {i + 1}"
        target = "table" if f"{prefix} table" in facts else "path"
        out.append(
            BatchWrite(
                facts.get(f"{prefix} mode", "?"),
                facts.get(f"{prefix} format", "?"),
                target,
                facts.get(f"{prefix} {target}", "?"),
            )
        )
    return tuple(out)


def _on_writer(node: ast.expr) -> bool:
    """An expression of ``<frame>.write`` (through ``mode``, ``format``, ``option``...)."""
    while True:
        if isinstance(node, ast.Attribute):
            if node.attr == "write":
                return True
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        else:
            return False


def _write(call: ast.Call, values: _Values) -> BatchWrite:
    assert isinstance(call.func, ast.Attribute)
    terminal = call.func.attr
    mode, fmt, where = "errorifexists", _TERMINALS[terminal], None
    if call.args:
        where = values.text(call.args[0])
    for keyword in call.keywords:
        if keyword.arg in ("path", "tableName", "name"):
            where = values.text(keyword.value)
        elif keyword.arg == "mode":
            mode = values.text(keyword.value).lower()
        elif keyword.arg == "format" and fmt is None:
            fmt = values.text(keyword.value).lower()
    node: ast.expr = call.func.value
    while isinstance(node, (ast.Call, ast.Attribute)):  # the chain, from the terminal back
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            name, first = node.func.attr, node.args[0]
            if name == "mode" and mode == "errorifexists":
                mode = values.text(first).lower()
            elif name == "format" and fmt is None:
                fmt = values.text(first).lower()
            elif (
                name == "option"
                and len(node.args) > 1
                and where is None
                and values.text(first).lower() == "path"
            ):
                where = values.text(node.args[1])
        if isinstance(node, ast.Call):
            node = node.func.value if isinstance(node.func, ast.Attribute) else node.func
        else:
            node = node.value
    target = "table" if terminal in _TABLES else "path"
    return BatchWrite(mode, fmt or "default", target, where or "-")


class _Values:
    """The text of an argument's value, where the function's code fixes it."""

    def __init__(self, func: types.FunctionType, node: ast.FunctionDef | ast.Lambda) -> None:
        self.known: dict[str, Any] = {}
        code = func.__code__
        for name, cell in zip(code.co_freevars, func.__closure__ or (), strict=False):
            try:
                self.known[name] = cell.cell_contents
            except ValueError:  # an empty cell
                continue
        defaults = func.__defaults__ or ()
        args = node.args.args
        for arg, value in zip(args[len(args) - len(defaults) :], defaults, strict=False):
            self.known[arg.arg] = value
        self.globals = func.__globals__
        positional = [a.arg for a in args]
        #: foreachBatch calls the function with (batch DataFrame, batch id)
        self.batch_id = positional[1] if len(positional) > 1 else None

    def value(self, node: ast.expr) -> Any:
        """A ``str`` or ``int`` the expression holds, else ``None``."""
        if isinstance(node, ast.Constant) and type(node.value) in (str, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.known:
                found = self.known[node.id]
            else:
                found = self.globals.get(node.id) if type(self.globals) is dict else None
            return found if type(found) in (str, dict) else None
        if isinstance(node, ast.Subscript):
            held, key = self.value(node.value), self.value(node.slice)
            if type(held) is dict and type(key) is str:
                item = held.get(key)
                return item if type(item) is str else None
        return None

    def text(self, node: ast.expr) -> str:
        found = self.value(node)
        if type(found) in (str, int):
            return str(found)[:_MAX_TEXT]
        if isinstance(node, ast.Name) and node.id == self.batch_id:
            return "<batch_id>"
        if isinstance(node, ast.JoinedStr):
            return "".join(
                self.text(part.value) if isinstance(part, ast.FormattedValue) else self.text(part)
                for part in node.values
            )[:_MAX_TEXT]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return (self.text(node.left) + self.text(node.right))[:_MAX_TEXT]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            template = self.value(node.left)
            parts = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            if type(template) is str:
                return _percent(template, [self.text(p) for p in parts])[:_MAX_TEXT]
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("os.path.join", "posixpath.join")
            and not node.keywords
        ):
            return "/".join(self.text(a).rstrip("/") for a in node.args)[:_MAX_TEXT]
        return "{" + ast.unparse(node)[:_MAX_TEXT] + "}"


def _percent(template: str, parts: list[str]) -> str:
    """``template % parts`` for ``%s``/``%d``/``%r`` placeholders, the parts as text."""
    out, i, k = [], 0, 0
    while i < len(template):
        c = template[i]
        if c == "%" and i + 1 < len(template):
            spec = template[i + 1]
            if spec == "%":
                out.append("%")
            elif k < len(parts):
                out.append(parts[k])
                k += 1
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)
