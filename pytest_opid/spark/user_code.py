"""Which code is the user's, and its objects read without running it: what
:mod:`.function_digest` needs to write a value without calling into the code it digests.

A module, class or file of the standard library, an installed package (site-packages) or
pytest-opid is library code; anything else is the user's. Classes and modules are read
through ``type``'s and ``ModuleType``'s own C descriptors (no metaclass, ``__getattr__`` or
property runs), an instance through the ``__dict__`` and ``__slots__`` descriptors of its
classes, and a profile hook (:class:`Guard`) refuses any call into the user's code while values
are read.
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
import types
from collections.abc import Iterator
from typing import Any

#: ``type``'s own descriptors: a class read through them runs no metaclass code.
TYPE_DICT: Any = vars(type)["__dict__"]


TYPE_NAME: Any = type.__dict__["__name__"]


TYPE_QUALNAME: Any = type.__dict__["__qualname__"]


TYPE_MODULE: Any = type.__dict__["__module__"]


TYPE_BASES: Any = type.__dict__["__bases__"]


TYPE_MRO: Any = type.__dict__["__mro__"]


MODULE_DICT: Any = vars(types.ModuleType)["__dict__"]


C_DESCRIPTORS = (types.GetSetDescriptorType, types.MemberDescriptorType)


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {sys.base_prefix, sys.base_exec_prefix}
    return tuple(os.path.join(os.path.abspath(r), "") for r in roots if r)


_LIBRARY_ROOTS = _library_roots()


#: pytest-opid's own code (an editable install is not under site-packages).
_OWN_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")


def library_file(path: str | None) -> bool:
    return bool(path) and os.path.abspath(str(path)).startswith(_LIBRARY_ROOTS)


def module_dict(module: Any) -> dict[str, Any]:
    """A module's namespace, read by ``ModuleType``'s own descriptor (a module subclass's
    ``__getattr__`` or properties are not run)."""
    found = MODULE_DICT.__get__(module, type(module))
    return found if type(found) is dict else {}


def library_module(name: str | None) -> bool:
    """A module of the standard library or of an installed package (not the user's code)."""
    if type(name) is not str or not name:
        return False
    top = name.partition(".")[0]
    if top in sys.builtin_module_names or top in getattr(sys, "stdlib_module_names", ()):
        return True
    module = sys.modules.get(name)
    if module is None or not issubclass(type(module), types.ModuleType):
        return False
    path = module_dict(module).get("__file__")
    return type(path) is str and library_file(path)


def class_dict(cls: type) -> dict[str, Any]:
    """A copy of a class's own namespace, read by ``type``'s descriptor (no metaclass code)."""
    return dict(TYPE_DICT.__get__(cls, type(cls)))


def class_module(cls: type) -> str | None:
    found = TYPE_MODULE.__get__(cls, type(cls))
    return found if type(found) is str else None


def class_name(cls: type) -> str:
    """``module.Qualified.Name`` of a class, by ``type``'s descriptors."""
    qualname = TYPE_QUALNAME.__get__(cls, type(cls))
    return f"{class_module(cls)}.{qualname if type(qualname) is str else '?'}"


def _found_in_library(cls: type) -> bool:
    """A class that its library module holds under its own name (a class made by ``exec``
    says ``builtins`` and is not there); looked up in the namespaces, never by attribute."""
    module_name = class_module(cls)
    if module_name is None or not library_module(module_name):
        return False
    module = sys.modules.get(module_name)
    if module is None:
        return False
    namespace: dict[str, Any] = module_dict(module)
    qualname = TYPE_QUALNAME.__get__(cls, type(cls))
    found: Any = None
    for part in str(qualname).split("."):
        found = namespace.get(part)
        if not issubclass(type(found), type):
            return False
        namespace = class_dict(found)
    return found is cls


def library_class(cls: type) -> bool:
    """A class of the standard library or an installed package. A class made by ``exec``
    says its module is ``builtins``: it is one only if ``builtins`` holds it."""
    module = class_module(cls)
    if module is None or not library_module(module):
        return False
    return module != "builtins" or _found_in_library(cls)


def function_name(func: types.FunctionType) -> str:
    return f"{func.__module__}.{func.__qualname__}"


class UserCode(BaseException):
    """A call into the user's code, refused before it ran. Not an ``Exception``: a library's
    ``except Exception`` around the call does not swallow it."""


class Guard:
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
                or library_file(filename)
                or os.path.abspath(filename).startswith(_OWN_ROOT)
            )
        if not allowed:
            raise UserCode(filename)

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


class Opaque(Exception):
    """A value that cannot be read without running its own code: written by its type."""


def c_attribute(owner: type, value: Any, name: str) -> Any:
    """``value.name`` through ``owner``'s C descriptor (a member or get-set), never a Python
    property or ``__getattribute__`` of a subclass."""
    descriptor: Any = class_dict(owner).get(name)
    if type(descriptor) not in C_DESCRIPTORS:
        raise Opaque
    return descriptor.__get__(value, owner)


def _mangled(cls: type, name: str) -> str:
    """A slot's attribute name as the class stores it (``__x`` of class ``C``: ``_C__x``)."""
    if name.startswith("__") and not name.endswith("__"):
        return f"_{str(TYPE_NAME.__get__(cls, type(cls))).lstrip('_')}{name}"
    return name


def instance_attributes(value: Any) -> dict[Any, Any] | None:
    """An instance's attributes, read by the C descriptors of its classes' ``__dict__`` and
    ``__slots__``; None where a class defines its own ``__dict__`` (a property)."""
    cls = type(value)
    attributes: dict[Any, Any] = {}
    found_dict = False
    for klass in TYPE_MRO.__get__(cls, type(cls)):
        namespace = class_dict(klass)
        descriptor = namespace.get("__dict__")
        if descriptor is not None and not found_dict:
            found_dict = True
            if type(descriptor) not in C_DESCRIPTORS:
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
