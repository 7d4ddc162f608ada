"""Walking a Java serialization stream (``java.io.ObjectInputStream``'s grammar, the Java Object
Serialization Specification, chapter 6) to its end without building any object.

``MetadataV4Serializer`` ends a ``_metadata`` file with the ``CheckpointProperties``, written by
``ObjectOutputStream``; walking them is how a file cut short there is noticed. Nothing recurses:
steps go on a work stack, and a class hierarchy is walked once per descriptor.
"""

from __future__ import annotations

from pytest_opid.io.java_data import DataInput

__all__ = ["ObjectStreamReader"]


class _JavaClassDesc:
    """A class descriptor of a Java serialization stream."""

    __slots__ = ("done", "fields", "flags", "head", "name", "parent")

    def __init__(self, name: str) -> None:
        self.name = name
        self.flags = 0
        self.fields: list[str] = []  # type codes
        self.parent: _JavaClassDesc | None = None
        self.done = False  # its superclass is read: ``parent`` is final
        # the nearest class from this one up with class data (None: none), once known
        self.head: _JavaClassDesc | object | None = _UNKNOWN

    def has_class_data(self) -> bool:
        """Whether an object of this class holds data of this class (fields, or what a
        writeObject or writeExternal method wrote); ObjectInputStream.readSerialData reads
        nothing for a serializable class with neither."""
        if self.flags & _SC_EXTERNALIZABLE:
            return True
        return bool(self.flags & _SC_SERIALIZABLE) and bool(
            self.fields or self.flags & _SC_WRITE_METHOD
        )


_JAVA_OBJECT = object()  # any object of the stream other than strings and class descriptors
_UNKNOWN = object()  # _JavaClassDesc.head not computed yet
_PRIMITIVE_WIDTHS = {"B": 1, "C": 2, "D": 8, "F": 4, "I": 4, "J": 8, "S": 2, "Z": 1}

# java.io.ObjectStreamConstants
_TC_NULL = 0x70
_TC_REFERENCE = 0x71
_TC_CLASSDESC = 0x72
_TC_OBJECT = 0x73
_TC_STRING = 0x74
_TC_ARRAY = 0x75
_TC_CLASS = 0x76
_TC_BLOCKDATA = 0x77
_TC_ENDBLOCKDATA = 0x78
_TC_RESET = 0x79
_TC_BLOCKDATALONG = 0x7A
_TC_LONGSTRING = 0x7C
_TC_PROXYCLASSDESC = 0x7D
_TC_ENUM = 0x7E
_BASE_WIRE_HANDLE = 0x7E0000
_SC_WRITE_METHOD = 0x01
_SC_SERIALIZABLE = 0x02
_SC_EXTERNALIZABLE = 0x04
_SC_BLOCK_DATA = 0x08

# Steps of the Java stream walker's work stack.
_J_READ, _J_DESC_DONE, _J_OBJECT, _J_FIELDS, _J_ANNOTATION = range(5)
_J_DISCARD, _J_ENUM, _J_ARRAY, _J_CLASS, _J_REPEAT, _J_PUSH = range(5, 11)

_JavaStep = tuple[int, object, int]


class ObjectStreamReader(DataInput):
    """The object stream part of a reader over Java's data stream: a reader that also names its
    file in errors mixes it in (it holds no state of its own)."""

    __slots__ = ()

    def java_string(self, handles: list[object]) -> str:
        """A string object: TC_STRING, TC_LONGSTRING or a reference to one."""
        at = self.pos
        tag = self.u8()
        if tag == _TC_STRING:
            text = self.utf_units()  # Java's string as is: never shown, lone surrogates too
        elif tag == _TC_LONGSTRING:
            length = self.i64()
            self.skip(length, "bytes of a long string")
            text = self.modified_utf8(self.data[self.pos - length : self.pos], at)
        elif tag == _TC_REFERENCE:
            found = self.java_reference(handles)
            if not isinstance(found, str):
                self.fail("a reference to a non-string where a string belongs", at)
            return found
        else:
            self.fail(f"unexpected serialization tag 0x{tag:02x} where a string belongs", at)
        handles.append(text)
        return text

    def java_reference(self, handles: list[object]) -> object:
        at = self.pos
        handle = self.i32() - _BASE_WIRE_HANDLE
        if not 0 <= handle < len(handles):
            self.fail("a reference to an unknown object", at)
        return handles[handle]

    def java_object_stream(self) -> None:
        """Walk one object of a Java serialization stream to its end (the grammar of the Java
        Object Serialization Specification, chapter 6) without building it.

        ``CheckpointProperties`` is read with ``ObjectInputStream.readObject``; walking it is
        how a file cut short there is noticed. Steps go on a work stack; results of finished
        reads (class descriptors, strings, placeholders) on a value stack.
        """
        at = self.pos
        if self.end - at < 4 or self.data[at : at + 4] != b"\xac\xed\x00\x05":
            self.fail("not a Java serialization stream", at)
        self.pos = at + 4
        handles: list[object] = []
        values: list[object] = []
        todo: list[_JavaStep] = [(_J_READ, None, 0)]
        while todo:
            step, arg, number = todo.pop()
            if step == _J_READ:
                self.java_content(todo, values, handles)
            elif step == _J_DESC_DONE:
                parent = values.pop()
                if parent is not None and not isinstance(parent, _JavaClassDesc):
                    self.fail("a superclass descriptor that is not a class descriptor")
                assert isinstance(arg, _JavaClassDesc)
                arg.parent = parent
                arg.done = True
                values.append(arg)
            elif step == _J_OBJECT:
                desc = self.java_desc(values)
                handles.append(_JAVA_OBJECT)
                todo.append((_J_PUSH, _JAVA_OBJECT, 0))
                # Class data goes from the topmost serializable class down; the work stack
                # takes it in reverse.
                cls = self.head(desc, handles)
                while cls is not None:
                    if cls.flags & _SC_EXTERNALIZABLE:
                        if not cls.flags & _SC_BLOCK_DATA:
                            self.fail("an externalizable object in the old stream format")
                        todo.append((_J_ANNOTATION, None, 0))
                    elif cls.flags & _SC_SERIALIZABLE:
                        if cls.flags & _SC_WRITE_METHOD:
                            todo.append((_J_ANNOTATION, None, 0))
                        todo.append((_J_FIELDS, cls, 0))
                    cls = None if cls.parent is None else self.head(cls.parent, handles)
            elif step == _J_FIELDS:
                assert isinstance(arg, _JavaClassDesc)
                fields = arg.fields
                index = number
                while index < len(fields):
                    code = fields[index]
                    index += 1
                    width = _PRIMITIVE_WIDTHS.get(code)
                    if width is None:
                        todo.append((_J_FIELDS, arg, index))
                        todo.append((_J_DISCARD, None, 0))
                        todo.append((_J_READ, None, 0))
                        break
                    self.skip(width, "bytes of a field")
            elif step == _J_ANNOTATION:
                tag_at = self.pos
                tag = self.u8()
                if tag == _TC_ENDBLOCKDATA:
                    continue
                todo.append((_J_ANNOTATION, None, 0))
                if tag == _TC_BLOCKDATA:
                    self.skip(self.u8(), "bytes of block data")
                elif tag == _TC_BLOCKDATALONG:
                    self.skip(self.i32(), "bytes of block data")
                else:
                    self.pos = tag_at
                    todo.append((_J_DISCARD, None, 0))
                    todo.append((_J_READ, None, 0))
            elif step == _J_DISCARD:
                values.pop()
            elif step == _J_ENUM:
                self.java_desc(values)
                handles.append(_JAVA_OBJECT)
                self.java_string(handles)
                values.append(_JAVA_OBJECT)
            elif step == _J_ARRAY:
                desc = self.java_desc(values)
                handles.append(_JAVA_OBJECT)
                length = self.i32()
                element = desc.name[1:2]
                width = _PRIMITIVE_WIDTHS.get(element)
                if width is not None:
                    self.skip(length, "array elements", width)
                    values.append(_JAVA_OBJECT)
                else:
                    if not 0 <= length <= self.end - self.pos:
                        self.fail(f"an array of {length} objects, more than the bytes left")
                    todo.append((_J_PUSH, _JAVA_OBJECT, 0))
                    todo.append((_J_REPEAT, None, length))
            elif step == _J_CLASS:
                self.java_desc(values)
                handles.append(_JAVA_OBJECT)
                values.append(_JAVA_OBJECT)
            elif step == _J_REPEAT:
                if number > 0:
                    todo.append((_J_REPEAT, None, number - 1))
                    todo.append((_J_DISCARD, None, 0))
                    todo.append((_J_READ, None, 0))
            else:  # _J_PUSH
                values.append(arg)

    def head(self, desc: _JavaClassDesc, handles: list[object]) -> _JavaClassDesc | None:
        """The nearest class from ``desc`` up its hierarchy that holds class data, or None.

        Kept on each complete descriptor, so that a hierarchy is walked once: an array of
        objects sharing a deep hierarchy of classes without data (a crafted file) would
        otherwise cost its depth per object, quadratic time in the file's size. What is left
        per object is one step per class with data, each of which reads at least a byte."""
        path: list[_JavaClassDesc] = []
        current: _JavaClassDesc | None = desc
        while current is not None and current.head is _UNKNOWN:
            if len(path) > len(handles):
                self.fail("a class hierarchy with a cycle")
            path.append(current)
            current = current.parent
        found = None if current is None else current.head
        complete = current is None or current.done
        for cls in reversed(path):
            if cls.has_class_data():
                found = cls
            complete = complete and cls.done  # one still being read may get a superclass yet
            if complete:
                cls.head = found
        assert found is None or isinstance(found, _JavaClassDesc)
        return found

    def java_desc(self, values: list[object]) -> _JavaClassDesc:
        desc = values.pop()
        if not isinstance(desc, _JavaClassDesc):
            self.fail("an object without a class descriptor")
        return desc

    def java_content(
        self, todo: list[_JavaStep], values: list[object], handles: list[object]
    ) -> None:
        """Start reading one object; what it contains goes on the work stack."""
        at = self.pos
        tag = self.u8()
        if tag == _TC_NULL:
            values.append(None)
        elif tag == _TC_REFERENCE:
            values.append(self.java_reference(handles))
        elif tag in (_TC_STRING, _TC_LONGSTRING):
            self.pos = at
            values.append(self.java_string(handles))
        elif tag == _TC_CLASSDESC:
            desc = _JavaClassDesc(self.utf_units())
            self.skip(8, "bytes of a serialVersionUID")
            handles.append(desc)
            desc.flags = self.u8()
            field_at = self.pos
            fields = self.i16()
            if not 0 <= fields <= self.end - self.pos:
                self.fail(f"invalid number of fields {fields}", field_at)
            for _ in range(fields):
                code_at = self.pos
                code = chr(self.u8())
                self.utf_units()  # the field name
                if code in "L[":
                    self.java_string(handles)  # the field's class name
                elif code not in _PRIMITIVE_WIDTHS:
                    self.fail(f"unknown field type code {code!r}", code_at)
                elif desc.fields and desc.fields[-1] in "L[":
                    # ObjectStreamClass.computeFieldOffsets: primitives come first.
                    self.fail("a primitive field after an object field", code_at)
                desc.fields.append(code)
            todo.append((_J_DESC_DONE, desc, 0))
            todo.append((_J_READ, None, 0))  # the superclass descriptor
            todo.append((_J_ANNOTATION, None, 0))  # the class annotation
        elif tag == _TC_PROXYCLASSDESC:
            desc = _JavaClassDesc("<proxy>")
            handles.append(desc)
            for _ in range(self.count("proxy interfaces")):
                self.utf_units()  # an interface name
            todo.append((_J_DESC_DONE, desc, 0))
            todo.append((_J_READ, None, 0))
            todo.append((_J_ANNOTATION, None, 0))
        elif tag in (_TC_OBJECT, _TC_ENUM, _TC_ARRAY, _TC_CLASS):
            follow = {_TC_OBJECT: _J_OBJECT, _TC_ENUM: _J_ENUM, _TC_ARRAY: _J_ARRAY}
            todo.append((follow.get(tag, _J_CLASS), None, 0))
            todo.append((_J_READ, None, 0))  # its class descriptor
        elif tag == _TC_RESET:
            handles.clear()
            todo.append((_J_READ, None, 0))
        else:
            self.fail(f"unexpected serialization tag 0x{tag:02x}", at)
