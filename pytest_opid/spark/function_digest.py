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

Reading never runs the user's code: values are read through the C-level slots of the builtin
types (a ``str`` subclass by ``str.__repr__``, an instance by the ``__dict__`` and ``__slots__``
descriptors of its classes, a class through ``type``'s own descriptors), never through
``repr``, properties, ``__getattribute__`` or a metaclass; and a profile hook refuses, before it
starts, any call into Python code outside the standard library, installed packages and
pytest-opid while values are read (a library ``repr`` that would call back into the user's
objects): such an object is written by its type. Sets and dicts are written in the order of their
items' own canonical text (never by ``hash()``), so the digest is the same under any
``PYTHONHASHSEED``; a container is measured before it is sorted, and long strings and bytes are
hashed in chunks. Source is read once per file (one parse, one index of its functions), only
from regular files of at most :data:`MAX_SOURCE_BYTES`. A pickled function (Spark's
``PythonFunction.command``) is unpickled and digested in a child process
(:func:`command_digest`), never in the test process.
"""

from __future__ import annotations

import ast
import enum
import functools
import hashlib
import linecache
import pickle
import re
import sys
import types
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from pytest_opid.spark.code_text import (
    MAX_SOURCE_BYTES,
    Source,
    Text,
    bytecode_text,
    names_read,
    tree_text,
)
from pytest_opid.spark.foreach_writer import user_writer
from pytest_opid.spark.isolation import IsolatedFailure, run_isolated
from pytest_opid.spark.transform_with_state import CHILD_PRELOAD, init_timeout
from pytest_opid.spark.user_code import (
    TYPE_BASES,
    TYPE_NAME,
    Guard,
    Opaque,
    UserCode,
    c_attribute,
    class_dict,
    class_name,
    function_name,
    instance_attributes,
    library_class,
    library_file,
    library_module,
    module_dict,
)

__all__ = [
    "MAX_ENTRIES",
    "MAX_SOURCE_BYTES",
    "MAX_VALUES",
    "FunctionDigest",
    "command_digest",
    "digest_of",
    "digest_pickled",
    "fact_parts",
]

#: Functions and classes of the user's code one digest follows, at most.
MAX_ENTRIES = 200
#: Values written per entry, at most (containers' items included).
MAX_VALUES = 20_000
#: Values of one set item or dict key written to order it among the others.
_MAX_KEY_VALUES = 64
#: Longest value text kept as it is (a library object's ``repr``).
_MAX_REPR = 2_000
#: Longest string or bytes written as it is; longer ones are hashed in chunks.
_MAX_TEXT = 4_096
_CHUNK = 1 << 20
#: Bytes of long strings hashed per digest, at most (then their length only).
_MAX_HASHED = 256 << 20
#: A memory address in a ``repr``: such a text differs from one process to the next.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
#: The value the meaning fact holds: the digest's first 16 hex digits and how it was made.
_FACT = re.compile(r"^([0-9a-f]{16}) \((source|Python \d+\.\d+ bytecode)\)$")
#: Builtin value types, written by their own C ``repr`` (``str()`` for dates and decimals).
_SCALARS: tuple[type, ...] = (bool, int, float, complex, str, bytes, bytearray)
_DATES: tuple[type, ...] = (datetime, date, time, timedelta, Decimal)


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
    with walk.guard.armed():
        walk.entries.append(walk.value_text(root))
        while walk.queue and len(walk.entries) <= MAX_ENTRIES:
            walk.entries.append(walk.entry_text(walk.queue.pop(0)))
    if walk.queue:
        walk.uncovered.add(f"only the first {MAX_ENTRIES} functions and classes")
    digest = hashlib.sha256()
    for k, entry in enumerate(walk.entries):
        digest.update(("\n" if k else "").encode() + entry.encode("utf-8", "surrogatepass"))
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    basis = f"Python {minor} bytecode" if walk.bytecode else "source"
    return FunctionDigest(digest.hexdigest(), basis, tuple(sorted(walk.uncovered)))


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


# -- the walk ---------------------------------------------------------------------------------


class _Close:
    """The end of a container: it may be written again (not a cycle any more)."""

    def __init__(self, ident: int, text: str) -> None:
        self.ident = ident
        self.text = text


_ATTRIBUTES_RUN_CODE = "objects whose reading would run their own code (written by type)"


class _Walk:
    """One digest: the entries written so far, the user functions and classes still to write
    (numbered in the order first met, which is the code's own order: sets and dicts are
    walked in the order of their items' text), and what was left out."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.queue: list[Any] = []
        self.numbers: dict[int, int] = {}
        self.keep: list[Any] = []  # the numbered objects stay alive, their ids unique
        self.uncovered: set[str] = set()
        self.bytecode = False
        self.sources: dict[str, Source | None] = {}
        self.guard = Guard()
        self.hashed = 0  # bytes of long strings hashed so far
        self.keying = 0  # > 0 while a set item's or a dict key's ordering text is written

    def ref(self, obj: Any, kind: str) -> str:
        """``function#3``: a function or class of the user's code, written as its own entry;
        while ordering, by name only (numbers follow the order being decided)."""
        if self.keying:
            name = class_name(obj) if kind == "class" else function_name(obj)
            return f"{kind} {name}"
        number = self.numbers.get(id(obj))
        if number is None:
            number = len(self.numbers) + 1
            self.numbers[id(obj)] = number
            self.keep.append(obj)
            self.queue.append(obj)
        return f"{kind}#{number}"

    # -- entries --------------------------------------------------------------------------------

    def entry_text(self, obj: Any) -> str:
        if issubclass(type(obj), type):
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
        names = names_read(code)
        module_globals = func.__globals__
        for name in sorted(names):
            if not dict.__contains__(module_globals, name):
                continue  # a builtin, or an attribute's name
            value = dict.__getitem__(module_globals, name)
            lines.append(f"global {name} = {self.value_text(value)}")
            if issubclass(type(value), types.ModuleType):
                namespace = module_dict(value)
                if library_module(namespace.get("__name__")):
                    continue
                for attribute in sorted(names):
                    if attribute in namespace:
                        text = self.value_text(namespace[attribute])
                        lines.append(f"global {name}.{attribute} = {text}")
        attributes = func.__dict__
        if attributes:
            lines.append(f"attributes {self.value_text(dict(attributes))}")
        return "\n".join(lines)

    def _class_text(self, cls: type) -> str:
        bases = ", ".join(self.value_text(b) for b in TYPE_BASES.__get__(cls, type(cls)))
        lines = [f"{self.ref(cls, 'class')}({bases}):"]
        # By name: cloudpickle rebuilds a class of a script or of exec'd code with its
        # attributes in another order from one unpickling to the next.
        namespace = class_dict(cls)
        for name in sorted(k for k in namespace if type(k) is str):
            value = namespace[name]
            if (name.startswith("__") and name.endswith("__")) or name == "_abc_impl":
                continue  # Python's own (__dict__, __module__, __doc__, an ABC's cache...)
            kind = ""
            if issubclass(type(value), (staticmethod, classmethod)):
                kind = "staticmethod" if issubclass(type(value), staticmethod) else "classmethod"
                value = c_attribute(type(value), value, "__func__")
            elif issubclass(type(value), property):
                parts = tuple(c_attribute(property, value, f) for f in ("fget", "fset", "fdel"))
                lines.append(f"{name} = property{self.value_text(parts)}")
                continue
            lines.append(f"{name} = {kind}{self.value_text(value)}")
        return "\n".join(lines)

    # -- code ---------------------------------------------------------------------------------

    def _code_text(self, func: types.FunctionType) -> str:
        with self.guard.paused():
            node = self._source_node(func.__code__)
            if node is not None:
                return "source " + tree_text(node)
            self.bytecode = True
            return "bytecode " + bytecode_text(func.__code__)

    def _source_node(self, code: types.CodeType) -> ast.AST | None:
        """The ``def`` or ``lambda`` of ``code`` in its file's source, without its name and
        docstring; None where the source is not there or not one match. Each file is read and
        parsed once, and its functions indexed by name and first line once."""
        filename = code.co_filename
        if filename not in self.sources:
            self.sources[filename] = Source.read(filename)
        source = self.sources[filename]
        if source is None:
            return None
        args = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        found: list[ast.AST] = []
        for node in source.index.get((code.co_name, code.co_firstlineno), ()):
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

    def value_text(self, value: Any, budget: int = MAX_VALUES) -> str:
        """``value`` written canonically, its containers walked with a stack; at most
        ``budget`` values."""
        out: list[str] = []
        stack: list[Any] = [value]
        open_ids: set[int] = set()
        count = 0
        while stack:
            item = stack.pop()
            if type(item) is Text:
                out.append(item)
                continue
            if type(item) is _Close:
                open_ids.discard(item.ident)
                out.append(item.text)
                continue
            count += 1
            if count > budget:
                if not self.keying:
                    self.uncovered.add(f"values past the first {MAX_VALUES} of an entry")
                out.append("…")
                break
            try:
                text = self._atom(item)
                if text is None:
                    if id(item) in open_ids:
                        out.append("<cycle>")
                        continue
                    opened, items = self._container(item, budget - count)
            except (UserCode, Opaque):
                self.guard.rearm()
                self.uncovered.add(_ATTRIBUTES_RUN_CODE)
                out.append(f"<object {class_name(type(item))}>")
                continue
            if text is not None:
                out.append(text)
                continue
            open_ids.add(id(item))
            out.append(opened)
            stack.append(_Close(id(item), ")"))
            stack.extend(reversed(items))
        return "".join(out)

    def _atom(self, value: Any) -> str | None:
        """A value written in one piece, or None for a container (:meth:`_container`)."""
        cls = type(value)
        if value is None:
            return "NoneType:None"
        if cls in _SCALARS:
            return f"{TYPE_NAME.__get__(cls, type)}:{self._scalar_text(value, cls)}"
        if cls in _DATES:
            return f"{TYPE_NAME.__get__(cls, type)}:{value}"
        if issubclass(cls, enum.Enum):
            attributes = instance_attributes(value)
            name = attributes.get("_name_") if attributes is not None else None
            if type(name) is not str:
                raise Opaque
            return f"{self.value_text(cls)}.{name}"
        if issubclass(cls, types.ModuleType):
            return f"module {module_dict(value).get('__name__')}"
        if cls is types.FunctionType:
            if library_file(value.__code__.co_filename):
                return f"function {function_name(value)}"
            return self.ref(value, "function")
        if issubclass(cls, type):
            if library_class(value):
                return f"class {class_name(value)}"
            return self.ref(value, "class")
        if cls in (types.BuiltinFunctionType, types.MethodDescriptorType):
            self.uncovered.add("C extension functions (named only)")
            owner = getattr(value, "__self__", None)
            if owner is not None and not issubclass(type(owner), types.ModuleType):
                return f"builtin {TYPE_NAME.__get__(type(owner), type)}.{value.__name__}"
            return f"builtin {value.__module__}.{value.__qualname__}"
        for base in (*_SCALARS, *_DATES):
            if issubclass(cls, base):  # a subclass: its class, and the value by the base's C code
                return f"{self.value_text(cls)}:{self._scalar_text(value, base)}"
        if issubclass(cls, _CONTAINERS):
            return None
        if not library_class(cls):
            return None  # an instance of a user class: its attributes
        text = _bounded_repr(value)
        if _ADDRESS.search(text) or len(text) > _MAX_REPR or text == "?":
            self.uncovered.add("objects whose text shows no value (written by type)")
            return f"<object {class_name(cls)}>"
        return f"{class_name(cls)}:{text}"

    def _scalar_text(self, value: Any, base: type) -> str:
        """A builtin value by its base type's own C code; long text hashed in chunks."""
        if base is str or base is bytes or base is bytearray:
            size = base.__len__(value)
            if size <= _MAX_TEXT:
                return str(base.__repr__(value))  # type: ignore[call-arg]
            return f"{size} long, {self._long_digest(value, base, size)}"
        if base is int and int.bit_length(value) > 10_000:  # decimal text is quadratic
            return "0x" + int.__format__(value, "x")
        return str(base.__repr__(value))  # type: ignore[call-arg]

    def _long_digest(self, value: Any, base: type, size: int) -> str:
        if self.hashed + size > _MAX_HASHED:
            self.uncovered.add(f"strings past {_MAX_HASHED >> 20} MiB (their length only)")
            return "not read"
        self.hashed += size
        digest = hashlib.sha256()
        for start in range(0, size, _CHUNK):
            part = base.__getitem__(value, slice(start, start + _CHUNK))  # type: ignore[index]
            digest.update(part.encode("utf-8", "surrogatepass") if base is str else part)
        return "sha256 " + digest.hexdigest()

    def _key(self, value: Any) -> str:
        """The text that orders ``value`` among a set's items or a dict's keys: itself,
        written canonically with functions and classes by name (never by hash)."""
        self.keying += 1
        try:
            return self.value_text(value, _MAX_KEY_VALUES)
        finally:
            self.keying -= 1

    def _container(self, value: Any, room: int) -> tuple[str, list[Any]]:
        """A container's opening text and its parts (values, and separators as text), read
        by the builtin types' own C code; measured before it is copied or sorted."""
        cls = type(value)
        parts: list[Any] = []
        if issubclass(cls, dict):
            size = dict.__len__(value)
            if size > room:
                return self._too_many("dict", size)
            pairs = [(self._key(k), k, v) for k, v in dict.items(value)]
            pairs.sort(key=lambda pair: pair[0])
            for k, (_, key, item) in enumerate(pairs):
                parts += [Text("; ")] if k else []
                parts += [key, Text(": "), item]
            return "dict(", parts
        if issubclass(cls, list):
            size = list.__len__(value)
            if size > room:
                return self._too_many("list", size)
            opened, items = "list(", list.copy(value)
        elif issubclass(cls, tuple):
            size = tuple.__len__(value)
            if size > room:
                return self._too_many("tuple", size)
            name = TYPE_NAME.__get__(cls, type(cls))
            opened, items = f"{name}(", list(tuple.__getitem__(value, slice(None)))
        elif issubclass(cls, (set, frozenset)):
            base = set if issubclass(cls, set) else frozenset
            size = base.__len__(value)
            if size > room:
                return self._too_many(base.__name__, size)
            keyed = [(self._key(item), item) for item in set(value)]
            keyed.sort(key=lambda pair: pair[0])
            opened, items = f"{TYPE_NAME.__get__(cls, type(cls))}(", [i for _, i in keyed]
        elif cls is types.MethodType:
            opened, items = "method(", [value.__self__, value.__func__]
        elif issubclass(cls, functools.partial):
            func, args, keywords = (
                c_attribute(functools.partial, value, name) for name in ("func", "args", "keywords")
            )
            opened, items = "partial(", [func, args, dict(keywords or {})]
        elif cls is types.CellType:
            try:
                opened, items = "cell(", [value.cell_contents]
            except ValueError:  # a cell not filled yet
                opened, items = "cell(", []
        else:  # an instance of a user class: the class and the attributes
            attributes = instance_attributes(value)
            if attributes is None:
                raise Opaque
            opened, items = "instance(", [cls, attributes]
        for k, item in enumerate(items):
            parts += [Text(", ")] if k else []
            parts.append(item)
        return opened, parts

    def _too_many(self, kind: str, size: int) -> tuple[str, list[Any]]:
        if not self.keying:
            self.uncovered.add(f"values past the first {MAX_VALUES} of an entry")
        return f"{kind}({size} items, past the bound", []


def _bounded_repr(value: Any) -> str:
    """A library object's ``repr`` (under the guard: a call back into the user's code is
    refused and the object written by its type)."""
    try:
        return str.__str__(repr(value))[: _MAX_REPR + 1]
    except UserCode:
        raise
    except Exception:  # a library object whose repr fails (or recurses too deep)
        return "?"


#: Text of :mod:`linecache` without a file (IPython cells) the child gets, at most.
_MAX_REGISTERED = 4 << 20


def command_digest(command: bytes, timeout: float | None = None) -> FunctionDigest:
    """The digest of the Python code in the pickled function Spark keeps for a stateful
    operator or a foreach sink (``PythonFunction.command``): applyInPandasWithState's function
    (pickled with its output type), a foreach writer (the function or object PySpark's
    wrapper holds, :mod:`pytest_opid.spark.foreach_writer`), or for transformWithState the
    stateful processor that
    ``TransformWithStateInPandasUdfUtils``'s bound method carries. Unpickling runs the user's
    code, so it is unpickled and digested in a child process
    (:func:`pytest_opid.spark.isolation.run_isolated`, within ``timeout`` seconds: the
    transformWithState ``init`` limit by default); :class:`ValueError` where that fails."""
    registered: dict[str, list[str]] = {}
    size = 0
    for name, entry in list(linecache.cache.items()):
        if type(entry) is tuple and len(entry) == 4 and entry[1] is None:
            lines = [line for line in entry[2] if type(line) is str]
            size += sum(map(len, lines))
            if size > _MAX_REGISTERED:
                break
            registered[name] = lines
    request = pickle.dumps((bytes(command), registered))
    limit = init_timeout() if timeout is None else timeout
    try:
        answer = run_isolated(
            "pytest_opid.spark.function_digest", "digest_pickled", request, limit, CHILD_PRELOAD
        )
    except IsolatedFailure as exc:
        raise ValueError(f"could not digest the function: it {exc.what}") from None
    if (
        not isinstance(answer, list)
        or len(answer) != 3
        or not all(isinstance(part, str) for part in answer[:2])
        or not isinstance(answer[2], list)
        or not all(isinstance(part, str) for part in answer[2])
        or re.fullmatch(r"[0-9a-f]{64}", answer[0]) is None
        or fact_parts(f"{answer[0][:16]} ({answer[1]})") is None
    ):
        raise ValueError("could not digest the function: its process sent back something else")
    return FunctionDigest(answer[0], answer[1], tuple(answer[2][:20]))


def digest_pickled(request: bytes) -> list[Any]:
    """In the child (:func:`command_digest`): the pickled function unpickled and digested,
    as ``[digest, basis, uncovered]``."""
    from pyspark.serializers import CPickleSerializer  # lazy: pyspark is an optional extra

    command, registered = pickle.loads(request)
    for name, lines in registered.items():
        linecache.cache.setdefault(name, (sum(map(len, lines)), None, lines, name))
    loaded = CPickleSerializer().loads(command)
    func = user_writer(loaded[0] if isinstance(loaded, tuple) and loaded else loaded)
    processor = getattr(getattr(func, "__self__", None), "_stateful_processor", None)
    found = digest_of(processor if processor is not None else func)
    return [found.digest, found.basis, list(found.uncovered)]
