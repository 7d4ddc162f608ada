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
import contextlib
import dis
import enum
import functools
import hashlib
import io
import linecache
import os
import pickle
import re
import stat
import sys
import sysconfig
import tokenize
import types
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from pytest_opid.spark.foreach_writer import user_writer
from pytest_opid.spark.isolation import IsolatedFailure, run_isolated
from pytest_opid.spark.transform_with_state import CHILD_PRELOAD, init_timeout

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
#: The largest source file read (a Python module of a few hundred thousand lines).
MAX_SOURCE_BYTES = 8 << 20
#: A memory address in a ``repr``: such a text differs from one process to the next.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
#: The flags that say what kind of code it is (generator, coroutine, ``*args``...); the others
#: are the compiler's ``__future__`` flags, which ``exec`` inherits from its caller.
_KIND_FLAGS = 0x3FF
#: The value the meaning fact holds: the digest's first 16 hex digits and how it was made.
_FACT = re.compile(r"^([0-9a-f]{16}) \((source|Python \d+\.\d+ bytecode)\)$")
#: ``type``'s own descriptors: a class read through them runs no metaclass code.
_TYPE_DICT: Any = vars(type)["__dict__"]
_TYPE_NAME: Any = type.__dict__["__name__"]
_TYPE_QUALNAME: Any = type.__dict__["__qualname__"]
_TYPE_MODULE: Any = type.__dict__["__module__"]
_TYPE_BASES: Any = type.__dict__["__bases__"]
_TYPE_MRO: Any = type.__dict__["__mro__"]
_MODULE_DICT: Any = vars(types.ModuleType)["__dict__"]
_C_DESCRIPTORS = (types.GetSetDescriptorType, types.MemberDescriptorType)
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


# -- which code is the user's ------------------------------------------------------------------


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {sys.base_prefix, sys.base_exec_prefix}
    return tuple(os.path.join(os.path.abspath(r), "") for r in roots if r)


_LIBRARY_ROOTS = _library_roots()
#: pytest-opid's own code (an editable install is not under site-packages).
_OWN_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")


def _library_file(path: str | None) -> bool:
    return bool(path) and os.path.abspath(str(path)).startswith(_LIBRARY_ROOTS)


def _module_dict(module: Any) -> dict[str, Any]:
    """A module's namespace, read by ``ModuleType``'s own descriptor (a module subclass's
    ``__getattr__`` or properties are not run)."""
    found = _MODULE_DICT.__get__(module, type(module))
    return found if type(found) is dict else {}


def _library_module(name: str | None) -> bool:
    """A module of the standard library or of an installed package (not the user's code)."""
    if type(name) is not str or not name:
        return False
    top = name.partition(".")[0]
    if top in sys.builtin_module_names or top in getattr(sys, "stdlib_module_names", ()):
        return True
    module = sys.modules.get(name)
    if module is None or not issubclass(type(module), types.ModuleType):
        return False
    path = _module_dict(module).get("__file__")
    return type(path) is str and _library_file(path)


def _class_dict(cls: type) -> dict[str, Any]:
    """A copy of a class's own namespace, read by ``type``'s descriptor (no metaclass code)."""
    return dict(_TYPE_DICT.__get__(cls, type(cls)))


def _class_module(cls: type) -> str | None:
    found = _TYPE_MODULE.__get__(cls, type(cls))
    return found if type(found) is str else None


def _class_name(cls: type) -> str:
    """``module.Qualified.Name`` of a class, by ``type``'s descriptors."""
    qualname = _TYPE_QUALNAME.__get__(cls, type(cls))
    return f"{_class_module(cls)}.{qualname if type(qualname) is str else '?'}"


def _found_in_library(cls: type) -> bool:
    """A class that its library module holds under its own name (a class made by ``exec``
    says ``builtins`` and is not there); looked up in the namespaces, never by attribute."""
    module_name = _class_module(cls)
    if module_name is None or not _library_module(module_name):
        return False
    module = sys.modules.get(module_name)
    if module is None:
        return False
    namespace: dict[str, Any] = _module_dict(module)
    qualname = _TYPE_QUALNAME.__get__(cls, type(cls))
    found: Any = None
    for part in str(qualname).split("."):
        found = namespace.get(part)
        if not issubclass(type(found), type):
            return False
        namespace = _class_dict(found)
    return found is cls


def _library_class(cls: type) -> bool:
    """A class of the standard library or an installed package. A class made by ``exec``
    says its module is ``builtins``: it is one only if ``builtins`` holds it."""
    module = _class_module(cls)
    if module is None or not _library_module(module):
        return False
    return module != "builtins" or _found_in_library(cls)


def _function_name(func: types.FunctionType) -> str:
    return f"{func.__module__}.{func.__qualname__}"


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


# -- no user code while values are read ---------------------------------------------------------


class _UserCode(BaseException):
    """A call into the user's code, refused before it ran. Not an ``Exception``: a library's
    ``except Exception`` around the call does not swallow it."""


class _Guard:
    """A profile hook that refuses every call into Python code outside the standard library,
    installed packages and pytest-opid (``sys.setprofile``: this thread only). CPython drops a
    profile hook that raised, so a refusal is followed by :meth:`rearm`."""

    def __init__(self) -> None:
        self.allowed: dict[str, bool] = {}
        self.previous: Any = None
        self.on = False

    def hook(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        filename = frame.f_code.co_filename
        allowed = self.allowed.get(filename)
        if allowed is None:
            allowed = self.allowed[filename] = (
                filename.startswith("<frozen ")
                or _library_file(filename)
                or os.path.abspath(filename).startswith(_OWN_ROOT)
            )
        if not allowed:
            raise _UserCode(filename)

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        self.previous = sys.getprofile()
        self.on = True
        sys.setprofile(self.hook)
        try:
            yield
        finally:
            self.on = False
            sys.setprofile(self.previous)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Off while only our own code runs on text (parsing source): it costs a call each."""
        sys.setprofile(None)
        try:
            yield
        finally:
            if self.on:
                sys.setprofile(self.hook)

    def rearm(self) -> bool:
        """Put the hook back; whether it was still there (else a refusal happened)."""
        was = sys.getprofile() is self.hook
        if self.on and not was:
            sys.setprofile(self.hook)
        return was


# -- the walk ---------------------------------------------------------------------------------


class _Text(str):
    """Text written as it is (not a value)."""


class _Close:
    """The end of a container: it may be written again (not a cycle any more)."""

    def __init__(self, ident: int, text: str) -> None:
        self.ident = ident
        self.text = text


class _Opaque(Exception):
    """A value that cannot be read without running its own code: written by its type."""


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
        self.sources: dict[str, _Source | None] = {}
        self.guard = _Guard()
        self.hashed = 0  # bytes of long strings hashed so far
        self.keying = 0  # > 0 while a set item's or a dict key's ordering text is written

    def ref(self, obj: Any, kind: str) -> str:
        """``function#3``: a function or class of the user's code, written as its own entry;
        while ordering, by name only (numbers follow the order being decided)."""
        if self.keying:
            name = _class_name(obj) if kind == "class" else _function_name(obj)
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
        names = _names_read(code)
        module_globals = func.__globals__
        for name in sorted(names):
            if not dict.__contains__(module_globals, name):
                continue  # a builtin, or an attribute's name
            value = dict.__getitem__(module_globals, name)
            lines.append(f"global {name} = {self.value_text(value)}")
            if issubclass(type(value), types.ModuleType):
                namespace = _module_dict(value)
                if _library_module(namespace.get("__name__")):
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
        bases = ", ".join(self.value_text(b) for b in _TYPE_BASES.__get__(cls, type(cls)))
        lines = [f"{self.ref(cls, 'class')}({bases}):"]
        # By name: cloudpickle rebuilds a class of a script or of exec'd code with its
        # attributes in another order from one unpickling to the next.
        namespace = _class_dict(cls)
        for name in sorted(k for k in namespace if type(k) is str):
            value = namespace[name]
            if (name.startswith("__") and name.endswith("__")) or name == "_abc_impl":
                continue  # Python's own (__dict__, __module__, __doc__, an ABC's cache...)
            kind = ""
            if issubclass(type(value), (staticmethod, classmethod)):
                kind = "staticmethod" if issubclass(type(value), staticmethod) else "classmethod"
                value = _c_attribute(type(value), value, "__func__")
            elif issubclass(type(value), property):
                parts = tuple(_c_attribute(property, value, f) for f in ("fget", "fset", "fdel"))
                lines.append(f"{name} = property{self.value_text(parts)}")
                continue
            lines.append(f"{name} = {kind}{self.value_text(value)}")
        return "\n".join(lines)

    # -- code ---------------------------------------------------------------------------------

    def _code_text(self, func: types.FunctionType) -> str:
        with self.guard.paused():
            node = self._source_node(func.__code__)
            if node is not None:
                return "source " + _tree_text(node)
            self.bytecode = True
            return "bytecode " + _bytecode_text(func.__code__)

    def _source_node(self, code: types.CodeType) -> ast.AST | None:
        """The ``def`` or ``lambda`` of ``code`` in its file's source, without its name and
        docstring; None where the source is not there or not one match. Each file is read and
        parsed once, and its functions indexed by name and first line once."""
        filename = code.co_filename
        if filename not in self.sources:
            self.sources[filename] = _Source.read(filename)
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
            if type(item) is _Text:
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
            except (_UserCode, _Opaque):
                self.guard.rearm()
                self.uncovered.add(_ATTRIBUTES_RUN_CODE)
                out.append(f"<object {_class_name(type(item))}>")
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
            return f"{_TYPE_NAME.__get__(cls, type)}:{self._scalar_text(value, cls)}"
        if cls in _DATES:
            return f"{_TYPE_NAME.__get__(cls, type)}:{value}"
        if issubclass(cls, enum.Enum):
            attributes = _instance_attributes(value)
            name = attributes.get("_name_") if attributes is not None else None
            if type(name) is not str:
                raise _Opaque
            return f"{self.value_text(cls)}.{name}"
        if issubclass(cls, types.ModuleType):
            return f"module {_module_dict(value).get('__name__')}"
        if cls is types.FunctionType:
            if _library_file(value.__code__.co_filename):
                return f"function {_function_name(value)}"
            return self.ref(value, "function")
        if issubclass(cls, type):
            if _library_class(value):
                return f"class {_class_name(value)}"
            return self.ref(value, "class")
        if cls in (types.BuiltinFunctionType, types.MethodDescriptorType):
            self.uncovered.add("C extension functions (named only)")
            owner = getattr(value, "__self__", None)
            if owner is not None and not issubclass(type(owner), types.ModuleType):
                return f"builtin {_TYPE_NAME.__get__(type(owner), type)}.{value.__name__}"
            return f"builtin {value.__module__}.{value.__qualname__}"
        for base in (*_SCALARS, *_DATES):
            if issubclass(cls, base):  # a subclass: its class, and the value by the base's C code
                return f"{self.value_text(cls)}:{self._scalar_text(value, base)}"
        if issubclass(cls, _CONTAINERS):
            return None
        if not _library_class(cls):
            return None  # an instance of a user class: its attributes
        text = _bounded_repr(value)
        if _ADDRESS.search(text) or len(text) > _MAX_REPR or text == "?":
            self.uncovered.add("objects whose text shows no value (written by type)")
            return f"<object {_class_name(cls)}>"
        return f"{_class_name(cls)}:{text}"

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
                parts += [_Text("; ")] if k else []
                parts += [key, _Text(": "), item]
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
            name = _TYPE_NAME.__get__(cls, type(cls))
            opened, items = f"{name}(", list(tuple.__getitem__(value, slice(None)))
        elif issubclass(cls, (set, frozenset)):
            base = set if issubclass(cls, set) else frozenset
            size = base.__len__(value)
            if size > room:
                return self._too_many(base.__name__, size)
            keyed = [(self._key(item), item) for item in set(value)]
            keyed.sort(key=lambda pair: pair[0])
            opened, items = f"{_TYPE_NAME.__get__(cls, type(cls))}(", [i for _, i in keyed]
        elif cls is types.MethodType:
            opened, items = "method(", [value.__self__, value.__func__]
        elif issubclass(cls, functools.partial):
            func, args, keywords = (
                _c_attribute(functools.partial, value, name)
                for name in ("func", "args", "keywords")
            )
            opened, items = "partial(", [func, args, dict(keywords or {})]
        elif cls is types.CellType:
            try:
                opened, items = "cell(", [value.cell_contents]
            except ValueError:  # a cell not filled yet
                opened, items = "cell(", []
        else:  # an instance of a user class: the class and the attributes
            attributes = _instance_attributes(value)
            if attributes is None:
                raise _Opaque
            opened, items = "instance(", [cls, attributes]
        for k, item in enumerate(items):
            parts += [_Text(", ")] if k else []
            parts.append(item)
        return opened, parts

    def _too_many(self, kind: str, size: int) -> tuple[str, list[Any]]:
        if not self.keying:
            self.uncovered.add(f"values past the first {MAX_VALUES} of an entry")
        return f"{kind}({size} items, past the bound", []


def _c_attribute(owner: type, value: Any, name: str) -> Any:
    """``value.name`` through ``owner``'s C descriptor (a member or get-set), never a Python
    property or ``__getattribute__`` of a subclass."""
    descriptor: Any = _class_dict(owner).get(name)
    if type(descriptor) not in _C_DESCRIPTORS:
        raise _Opaque
    return descriptor.__get__(value, owner)


def _mangled(cls: type, name: str) -> str:
    """A slot's attribute name as the class stores it (``__x`` of class ``C``: ``_C__x``)."""
    if name.startswith("__") and not name.endswith("__"):
        return f"_{str(_TYPE_NAME.__get__(cls, type(cls))).lstrip('_')}{name}"
    return name


def _instance_attributes(value: Any) -> dict[Any, Any] | None:
    """An instance's attributes, read by the C descriptors of its classes' ``__dict__`` and
    ``__slots__``; None where a class defines its own ``__dict__`` (a property)."""
    cls = type(value)
    attributes: dict[Any, Any] = {}
    found_dict = False
    for klass in _TYPE_MRO.__get__(cls, type(cls)):
        namespace = _class_dict(klass)
        descriptor = namespace.get("__dict__")
        if descriptor is not None and not found_dict:
            found_dict = True
            if type(descriptor) not in _C_DESCRIPTORS:
                return None
            inner = descriptor.__get__(value, cls)
            if type(inner) is dict:
                attributes.update(inner)
        slots = namespace.get("__slots__", ())
        slots = (slots,) if type(slots) is str else slots
        if type(slots) not in (tuple, list):
            continue
        for slot in slots:
            if type(slot) is not str or slot in ("__dict__", "__weakref__"):
                continue
            member = namespace.get(_mangled(klass, slot))
            if type(member) is not types.MemberDescriptorType:
                continue
            try:
                attributes[slot] = member.__get__(value, cls)
            except AttributeError:  # a slot not set
                continue
    return attributes


def _bounded_repr(value: Any) -> str:
    """A library object's ``repr`` (under the guard: a call back into the user's code is
    refused and the object written by its type)."""
    try:
        return str.__str__(repr(value))[: _MAX_REPR + 1]
    except _UserCode:
        raise
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
        todo.extend(c for c in current.co_consts if type(c) is types.CodeType)
    return names


class _Source:
    """One source file, read and parsed once, its functions and lambdas indexed by name and
    first line (a ``def``'s first line is its first decorator's)."""

    def __init__(self, tree: ast.Module) -> None:
        self.index: dict[tuple[str, int], list[Any]] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                self.index.setdefault((node.name, first), []).append(node)
            elif isinstance(node, ast.Lambda):
                self.index.setdefault(("<lambda>", node.lineno), []).append(node)

    @staticmethod
    def read(filename: str) -> _Source | None:
        text = _source_text(filename)
        if text is None:
            return None
        try:
            return _Source(ast.parse(text, filename))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None


def _source_text(filename: str) -> str | None:
    """The source of a code object's file: a regular file of at most
    :data:`MAX_SOURCE_BYTES` (a relative name looked up on ``sys.path``, as :mod:`linecache`
    does), else text registered in :mod:`linecache` without a file (an IPython cell). A FIFO,
    a device or a larger file is never read."""
    candidates = [filename]
    if not os.path.isabs(filename) and not filename.startswith("<"):
        candidates += [os.path.join(d, filename) for d in sys.path if type(d) is str and d]
    for path in candidates[:1000]:
        data = _regular_file(path)
        if data is not None:
            try:
                encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
                return data.decode(encoding)
            except (SyntaxError, LookupError, UnicodeDecodeError):
                return None
    entry = linecache.cache.get(filename)
    if type(entry) is tuple and len(entry) == 4 and entry[1] is None:
        lines = entry[2]
        if type(lines) is list and sum(len(line) for line in lines) <= MAX_SOURCE_BYTES:
            return "".join(line for line in lines if type(line) is str)
    return None


def _regular_file(path: str) -> bytes | None:
    """A regular file's bytes (at most :data:`MAX_SOURCE_BYTES`), opened without blocking."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SOURCE_BYTES:
            return None
        chunks: list[bytes] = []
        total = 0
        while total <= MAX_SOURCE_BYTES:
            chunk = os.read(fd, min(_CHUNK, MAX_SOURCE_BYTES + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return None if total > MAX_SOURCE_BYTES else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


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
