"""The text of a function's code that :mod:`.function_digest` hashes: its source parsed
with :mod:`ast` and written without positions, or, where no source can be found, its
bytecode without line numbers or names.

Source is read once per file (one parse, one index of its functions), only from regular
files of at most :data:`MAX_SOURCE_BYTES` (or text :mod:`linecache` holds without a file);
everything is walked with explicit stacks, whatever the depth of the code.
"""

from __future__ import annotations

import ast
import dis
import io
import linecache
import os
import stat
import sys
import tokenize
import types
from typing import Any

#: Bytes read from a source file at a time.
_READ_CHUNK = 1 << 20
#: The flags that say what kind of code it is (generator, coroutine, ``*args``...); the others
#: are the compiler's ``__future__`` flags, which ``exec`` inherits from its caller.
_KIND_FLAGS = 0x3FF


#: The largest source file read (a Python module of a few hundred thousand lines).
MAX_SOURCE_BYTES = 8 << 20


class Text(str):
    """Text written as it is (not a value)."""


def names_read(code: types.CodeType) -> set[str]:
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


class Source:
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
    def read(filename: str) -> Source | None:
        text = _source_text(filename)
        if text is None:
            return None
        try:
            return Source(ast.parse(text, filename))
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
            chunk = os.read(fd, min(_READ_CHUNK, MAX_SOURCE_BYTES + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return None if total > MAX_SOURCE_BYTES else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def tree_text(root: ast.AST) -> str:
    """An AST without positions, walked with a stack; fields that are None or empty are left
    out (Python adds fields from one minor version to the next, empty in older code)."""
    out: list[str] = []
    stack: list[Any] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, Text):
            out.append(item)
        elif isinstance(item, ast.AST):
            fields = [
                (name, value)
                for name, value in ast.iter_fields(item)
                if value is not None and value != [] and name != "type_comment"
            ]
            out.append(type(item).__name__ + "(")
            stack.append(Text(")"))
            for k, (name, value) in reversed(list(enumerate(fields))):
                stack.append(value)
                stack.append(Text(f"{', ' if k else ''}{name}="))
        elif isinstance(item, list):
            out.append("[")
            stack.append(Text("]"))
            for k, value in reversed(list(enumerate(item))):
                stack.append(value)
                if k:
                    stack.append(Text(", "))
        else:
            out.append(f"{type(item).__name__}:{item!r}")
    return "".join(out)


def bytecode_text(code: types.CodeType) -> str:
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
