"""A stable digest of the Python code that updates a state: applyInPandasWithState's function,
a transformWithState processor (its class's methods and the instance's attributes).

Spark files a group's state by its key and checks at restart only the state's schema; the
function that reads and updates it is not in the checkpoint. A query whose function changed
(a session timeout from 30 to 10 minutes, under the same name) restarts, and the new function
continues sessions the old one built under the other rule. So the function is recorded as a
digest of what decides what it does, and a changed digest is a change of the state's meaning.

What the digest covers, per function (and, iteratively, per function or class of the user's
code that it reaches):

* its code: the function's source (``linecache``, as :mod:`inspect` reads it) parsed with
  :mod:`ast` and written without positions, comments, its docstring or its own name, so that a
  rename, a reformat or a moved line keeps the digest. Where no source can be found (code run
  by ``exec``, a file gone) the instructions of the code object are used instead, without line
  numbers or names, and the digest says so (``Python 3.11 bytecode``): the same across
  processes and patch versions of one Python minor version, another on another minor version
  (a digest from source and one from bytecode are never compared as equal or changed);
* its default arguments, the values it closes over and the module globals it reads (the
  names its code objects load, and for a module of the user's code the attributes read from
  it), each written canonically: numbers, strings, bytes, containers (sets sorted), dates,
  enums, a library function or class by module and name, a function or class of the user's
  code by its own digest entry, an instance of a user class by its class and attributes;
* a class: its bases and every attribute and method it defines (methods by name).

What it does not cover (the digest stays the same): values read at run time from files, the
environment, a service or a Spark conf; library code (pandas, PySpark, a package installed in
site-packages), named by module and name only, whatever its version; C extension functions
(by name); objects whose text shows no value (written by type: ``<object pkg.Type>``);
anything past :data:`MAX_ENTRIES` functions and classes or :data:`MAX_VALUES` values per entry
(counted, so the digest stays stable). Everything is walked with explicit stacks and queues:
no recursion, whatever the depth of the code or of the values.
"""

from __future__ import annotations

import ast
import dis
import enum
import functools
import hashlib
import linecache
import os
import re
import sys
import sysconfig
import types
from dataclasses import dataclass
from datetime import date, time, timedelta
from decimal import Decimal
from typing import Any

#: Functions and classes of the user's code one digest follows, at most.
MAX_ENTRIES = 200
#: Values written per entry, at most (containers' items included).
MAX_VALUES = 20_000
#: Longest value text kept as it is (a library object's ``repr``).
_MAX_REPR = 2_000
#: A memory address in a ``repr``: such a text differs from one process to the next.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
#: The flags that say what kind of code it is (generator, coroutine, ``*args``...); the others
#: are the compiler's ``__future__`` flags, which ``exec`` inherits from its caller.
_KIND_FLAGS = 0x3FF
#: The value the meaning fact holds: the digest's first 16 hex digits and how it was made.
_FACT = re.compile(r"^([0-9a-f]{16}) \((source|Python \d+\.\d+ bytecode)\)$")


@dataclass(frozen=True)
class FunctionDigest:
    """A digest of the code that updates a state: ``digest`` (hex), ``basis`` (``source``, or
    ``Python 3.11 bytecode`` where some code had no source) and what it could not cover."""

    digest: str
    basis: str
    uncovered: tuple[str, ...] = ()

    @property
    def fact(self) -> str:
        """The meaning fact's value: ``3f2a9c0d1e2b4a5c (source)``."""
        return f"{self.digest[:16]} ({self.basis})"


def fact_parts(value: str) -> tuple[str, str] | None:
    """(digest, basis) of a meaning fact's value written by :attr:`FunctionDigest.fact`."""
    match = _FACT.match(value)
    return (match.group(1), match.group(2)) if match else None


def digest_of(root: Any) -> FunctionDigest:
    """The digest of ``root``: a function (lambda, ``functools.partial``, bound method) or an
    object whose class's methods do the work (a transformWithState ``StatefulProcessor``)."""
    walk = _Walk()
    walk.entries.append(walk.value_text(root))
    while walk.queue and len(walk.entries) <= MAX_ENTRIES:
        walk.entries.append(walk.entry_text(walk.queue.pop(0)))
    if walk.queue:
        walk.uncovered.add(f"only the first {MAX_ENTRIES} functions and classes")
    text = "\n".join(walk.entries)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    basis = f"Python {minor} bytecode" if walk.bytecode else "source"
    return FunctionDigest(digest, basis, tuple(sorted(walk.uncovered)))


# -- which code is the user's ------------------------------------------------------------------


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {sys.base_prefix, sys.base_exec_prefix}
    return tuple(os.path.join(os.path.abspath(r), "") for r in roots if r)


_LIBRARY_ROOTS = _library_roots()


def _library_file(path: str | None) -> bool:
    return bool(path) and os.path.abspath(str(path)).startswith(_LIBRARY_ROOTS)


def _library_module(name: str | None) -> bool:
    """A module of the standard library or of an installed package (not the user's code)."""
    if not name:
        return False
    top = name.partition(".")[0]
    if top in sys.builtin_module_names or top in getattr(sys, "stdlib_module_names", ()):
        return True
    module = sys.modules.get(name)
    return module is not None and _library_file(getattr(module, "__file__", None))


def _found_in_library(obj: Any) -> bool:
    """A class or function that its library module holds under its own name (a class made
    by ``exec`` says ``builtins`` and is not there)."""
    module_name = getattr(obj, "__module__", None)
    if not isinstance(module_name, str) or not _library_module(module_name):
        return False
    found: Any = sys.modules.get(module_name)
    for part in str(getattr(obj, "__qualname__", "")).split("."):
        found = getattr(found, part, None)
    return found is obj


def _library_class(cls: type) -> bool:
    """A class of the standard library or an installed package. A class made by ``exec``
    says its module is ``builtins``: it is one only if ``builtins`` holds it."""
    module = getattr(cls, "__module__", None)
    if not isinstance(module, str) or not _library_module(module):
        return False
    return module != "builtins" or _found_in_library(cls)


_CONTAINERS = (
    list,
    tuple,
    dict,
    set,
    frozenset,
    types.MethodType,
    functools.partial,
    types.CellType,
)


def _name(obj: Any) -> str:
    return f"{getattr(obj, '__module__', None)}.{getattr(obj, '__qualname__', '?')}"


# -- the walk ---------------------------------------------------------------------------------


class _Text(str):
    """Text written as it is (not a value)."""


class _Close:
    """The end of a container: it may be written again (not a cycle any more)."""

    def __init__(self, ident: int, text: str) -> None:
        self.ident = ident
        self.text = text


class _Walk:
    """One digest: the entries written so far, the user functions and classes still to write
    (numbered in the order first met, which is the code's own order), and what was left out."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.queue: list[Any] = []
        self.numbers: dict[int, int] = {}
        self.keep: list[Any] = []  # the numbered objects stay alive, their ids unique
        self.uncovered: set[str] = set()
        self.bytecode = False
        self.trees: dict[str, ast.Module | None] = {}

    def ref(self, obj: Any, kind: str) -> str:
        """``function#3``: a function or class of the user's code, written as its own entry."""
        number = self.numbers.get(id(obj))
        if number is None:
            number = len(self.numbers) + 1
            self.numbers[id(obj)] = number
            self.keep.append(obj)
            self.queue.append(obj)
        return f"{kind}#{number}"

    # -- entries --------------------------------------------------------------------------------

    def entry_text(self, obj: Any) -> str:
        if isinstance(obj, type):
            return self._class_text(obj)
        return self._function_text(obj)

    def _function_text(self, func: types.FunctionType) -> str:
        code = func.__code__
        lines = [f"{self.ref(func, 'function')}:", f"code {self._code_text(func)}"]
        if func.__defaults__:
            lines.append(f"defaults {self.value_text(func.__defaults__)}")
        if func.__kwdefaults__:
            lines.append(f"keyword defaults {self.value_text(func.__kwdefaults__)}")
        for name, cell in zip(code.co_freevars, func.__closure__ or (), strict=False):
            try:
                value = cell.cell_contents
            except ValueError:  # a cell not filled yet
                lines.append(f"closure {name} empty")
                continue
            lines.append(f"closure {name} = {self.value_text(value)}")
        names = _names_read(code)
        module_globals = func.__globals__
        for name in sorted(names):
            if name not in module_globals:
                continue  # a builtin, or an attribute's name
            value = module_globals[name]
            lines.append(f"global {name} = {self.value_text(value)}")
            if isinstance(value, types.ModuleType) and not _library_module(value.__name__):
                for attribute in sorted(names):
                    if attribute in vars(value):
                        text = self.value_text(vars(value)[attribute])
                        lines.append(f"global {name}.{attribute} = {text}")
        if func.__dict__:
            lines.append(f"attributes {self.value_text(dict(func.__dict__))}")
        return "\n".join(lines)

    def _class_text(self, cls: type) -> str:
        bases = ", ".join(self.value_text(b) for b in cls.__bases__)
        lines = [f"{self.ref(cls, 'class')}({bases}):"]
        # By name: cloudpickle rebuilds a class of a script or of exec'd code with its
        # attributes in another order from one unpickling to the next.
        for name, value in sorted(vars(cls).items()):
            if (name.startswith("__") and name.endswith("__")) or name == "_abc_impl":
                continue  # Python's own (__dict__, __module__, __doc__, an ABC's cache...)
            if isinstance(value, (staticmethod, classmethod)):
                kind, value = type(value).__name__, value.__func__
            elif isinstance(value, property):
                parts = (value.fget, value.fset, value.fdel)
                lines.append(f"{name} = property{self.value_text(parts)}")
                continue
            else:
                kind = ""
            lines.append(f"{name} = {kind}{self.value_text(value)}")
        return "\n".join(lines)

    # -- code ---------------------------------------------------------------------------------

    def _code_text(self, func: types.FunctionType) -> str:
        node = self._source_node(func.__code__)
        if node is not None:
            return "source " + _tree_text(node)
        self.bytecode = True
        return "bytecode " + _bytecode_text(func.__code__)

    def _source_node(self, code: types.CodeType) -> ast.AST | None:
        """The ``def`` or ``lambda`` of ``code`` in its file's source, without its name and
        docstring; None where the source is not there or not one match."""
        filename = code.co_filename
        if filename not in self.trees:
            self.trees[filename] = _parsed_file(filename)
        tree = self.trees[filename]
        if tree is None:
            return None
        args = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        found: list[ast.AST] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if node.name != code.co_name or first != code.co_firstlineno:
                    continue
            elif isinstance(node, ast.Lambda):
                if code.co_name != "<lambda>" or node.lineno != code.co_firstlineno:
                    continue
            else:
                continue
            given = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
            given += [a.arg for a in node.args.kwonlyargs]
            if tuple(given) == args:
                found.append(node)
        if len(found) != 1:
            return None
        node = found[0]
        if isinstance(node, ast.Lambda):
            return node
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        body = list(node.body)
        if (
            len(body) > 1
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:]  # the docstring
        kind = type(node)
        return kind(
            name="",
            args=node.args,
            body=body,
            decorator_list=node.decorator_list,
            returns=node.returns,
        )

    # -- values ---------------------------------------------------------------------------------

    def value_text(self, value: Any) -> str:
        """``value`` written canonically, its containers walked with a stack."""
        out: list[str] = []
        stack: list[Any] = [value]
        open_ids: set[int] = set()
        count = 0
        while stack:
            item = stack.pop()
            if isinstance(item, _Text):
                out.append(item)
                continue
            if isinstance(item, _Close):
                open_ids.discard(item.ident)
                out.append(item.text)
                continue
            count += 1
            if count > MAX_VALUES:
                self.uncovered.add(f"values past the first {MAX_VALUES} of an entry")
                out.append("…")
                break
            text = self._atom(item)
            if text is not None:
                out.append(text)
                continue
            if id(item) in open_ids:
                out.append("<cycle>")
                continue
            opened, items = self._container(item)
            open_ids.add(id(item))
            out.append(opened)
            stack.append(_Close(id(item), ")"))
            stack.extend(reversed(items))
        return "".join(out)

    def _atom(self, value: Any) -> str | None:
        """A value written in one piece, or None for a container (:meth:`_container`)."""
        if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
            return f"{type(value).__name__}:{value!r}"
        if isinstance(value, (date, time, timedelta, Decimal)):
            return f"{type(value).__name__}:{value}"
        if isinstance(value, enum.Enum):
            return f"{self.value_text(type(value))}.{value.name}"
        if isinstance(value, types.ModuleType):
            return f"module {value.__name__}"
        if isinstance(value, types.FunctionType):
            if _library_file(value.__code__.co_filename):
                return f"function {_name(value)}"
            return self.ref(value, "function")
        if isinstance(value, type):
            if _library_class(value):
                return f"class {_name(value)}"
            return self.ref(value, "class")
        if isinstance(value, (types.BuiltinFunctionType, types.MethodDescriptorType)):
            self.uncovered.add("C extension functions (named only)")
            owner = getattr(value, "__self__", None)
            if owner is not None and not isinstance(owner, types.ModuleType):
                return f"builtin {type(owner).__name__}.{value.__name__}"
            return f"builtin {getattr(value, '__module__', None)}.{value.__qualname__}"
        if isinstance(value, _CONTAINERS):
            return None
        cls = type(value)
        if not _library_class(cls):
            return None  # an instance of a user class: its attributes
        text = _safe_repr(value)
        if _ADDRESS.search(text) or len(text) > _MAX_REPR or text == "?":
            self.uncovered.add("objects whose text shows no value (written by type)")
            return f"<object {_name(cls)}>"
        return f"{_name(cls)}:{text}"

    def _container(self, value: Any) -> tuple[str, list[Any]]:
        """A container's opening text and its parts (values, and separators as text)."""
        if isinstance(value, dict):
            pairs = sorted(value.items(), key=lambda pair: _sort_key(pair[0]))
            parts: list[Any] = []
            for k, (key, item) in enumerate(pairs):
                parts += [_Text("; ")] if k else []
                parts += [key, _Text(": "), item]
            return "dict(", parts
        if isinstance(value, list):
            opened, items = "list(", list(value)
        elif isinstance(value, tuple):
            opened, items = f"{type(value).__name__}(", list(value)
        elif isinstance(value, (set, frozenset)):
            opened, items = f"{type(value).__name__}(", sorted(value, key=_sort_key)
        elif isinstance(value, types.MethodType):
            opened, items = "method(", [value.__self__, value.__func__]
        elif isinstance(value, functools.partial):
            opened, items = "partial(", [value.func, value.args, dict(value.keywords)]
        elif isinstance(value, types.CellType):
            try:
                opened, items = "cell(", [value.cell_contents]
            except ValueError:  # a cell not filled yet
                opened, items = "cell(", []
        else:  # an instance of a user class: the class and the attributes
            attributes = dict(getattr(value, "__dict__", {}))
            for slot in getattr(type(value), "__slots__", ()):
                try:
                    attributes[slot] = getattr(value, slot)
                except Exception:  # a slot not set, or a property that raises
                    continue
            opened, items = "instance(", [type(value), attributes]
        parts = []
        for k, item in enumerate(items):
            parts += [_Text(", ")] if k else []
            parts.append(item)
        return opened, parts


def _sort_key(value: Any) -> tuple[str, str]:
    """A set's items and a dict's keys in an order that does not follow hashing (string
    hashes differ from one process to the next)."""
    text = _safe_repr(value)
    return (type(value).__name__, "" if _ADDRESS.search(text) else text)


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # a library object whose repr fails (or recurses too deep)
        return "?"


def _names_read(code: types.CodeType) -> set[str]:
    """The names ``code`` and the code nested in it load (globals, and attributes' names)."""
    names: set[str] = set()
    todo = [code]
    seen = 0
    while todo and seen < 10_000:
        current = todo.pop()
        seen += 1
        names.update(current.co_names)
        todo.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return names


def _parsed_file(filename: str) -> ast.Module | None:
    linecache.checkcache(filename)  # a file edited since it was read: read it again
    lines = linecache.getlines(filename)
    if not lines:
        return None
    try:
        return ast.parse("".join(lines), filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _tree_text(root: ast.AST) -> str:
    """An AST without positions, walked with a stack; fields that are None or empty are left
    out (Python adds fields from one minor version to the next, empty in older code)."""
    out: list[str] = []
    stack: list[Any] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, _Text):
            out.append(item)
        elif isinstance(item, ast.AST):
            fields = [
                (name, value)
                for name, value in ast.iter_fields(item)
                if value is not None and value != [] and name != "type_comment"
            ]
            out.append(type(item).__name__ + "(")
            stack.append(_Text(")"))
            for k, (name, value) in reversed(list(enumerate(fields))):
                stack.append(value)
                stack.append(_Text(f"{', ' if k else ''}{name}="))
        elif isinstance(item, list):
            out.append("[")
            stack.append(_Text("]"))
            for k, value in reversed(list(enumerate(item))):
                stack.append(value)
                if k:
                    stack.append(_Text(", "))
        else:
            out.append(f"{type(item).__name__}:{item!r}")
    return "".join(out)


def _bytecode_text(code: types.CodeType) -> str:
    """The instructions of ``code`` and of the code nested in it, numbered in order, without
    line numbers, addresses or the code's own name."""
    out: list[str] = []
    todo: list[types.CodeType] = [code]
    number = 0
    while todo and number < 10_000:
        current = todo.pop(0)
        number += 1
        out.append(
            f"code {number} args {current.co_argcount}/{current.co_posonlyargcount}/"
            f"{current.co_kwonlyargcount} vars {current.co_varnames} "
            f"free {current.co_freevars} cells {current.co_cellvars} "
            f"flags {current.co_flags & _KIND_FLAGS}:"
        )
        instructions = list(dis.get_instructions(current))
        for k, instruction in enumerate(instructions):
            argument = instruction.argval
            following = instructions[k + 1].opname if k + 1 < len(instructions) else ""
            if isinstance(argument, str) and following == "MAKE_FUNCTION":
                text = "qualified name"  # Python 3.10 loads a nested function's: names vary
            elif isinstance(argument, types.CodeType):
                todo.append(argument)
                text = f"code {number + len(todo)}"
            elif instruction.opname in ("LOAD_CONST", "RETURN_CONST", "KW_NAMES"):
                text = _const_text(argument)
            else:
                text = instruction.argrepr
            out.append(f"{instruction.opname} {text}")
    return "\n".join(out)


def _const_text(value: Any) -> str:
    """A constant of a code object (numbers, strings, tuples and frozensets of them)."""
    if isinstance(value, frozenset):
        return "frozenset(" + ", ".join(sorted(map(_const_text, value))) + ")"
    if isinstance(value, tuple):
        return "(" + ", ".join(map(_const_text, value)) + ")"
    return f"{type(value).__name__}:{value!r}"


def command_digest(command: bytes) -> FunctionDigest:
    """The digest of the Python code in the pickled function Spark keeps for a stateful
    operator (``PythonFunction.command``): applyInPandasWithState's function (pickled with its
    output type), or for transformWithState the stateful processor that
    ``TransformWithStateInPandasUdfUtils``'s bound method carries."""
    from pyspark.serializers import CPickleSerializer  # lazy: pyspark is an optional extra

    loaded = CPickleSerializer().loads(command)
    func = loaded[0] if isinstance(loaded, tuple) and loaded else loaded
    processor = getattr(getattr(func, "__self__", None), "_stateful_processor", None)
    return digest_of(processor if processor is not None else func)
