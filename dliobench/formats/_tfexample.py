"""Just enough of the ``tf.train.Example`` protobuf to write and read one image per record.

The record is ``Example{features: Features{feature: {"size": int64_list[len],
"image": bytes_list[data]}}}``, encoded by hand (no protobuf or TensorFlow dependency). The
image is the last field, so an encoder emits a small prefix and then the sample's bytes as
they are, and a decoder returns the image's position without copying it.

Wire format facts used (protobuf encoding spec): a field key is the varint
``field_number << 3 | wire_type``; wire type 2 is length-delimited (varint length, then
bytes), 0 is a varint, 1 is 8 bytes, 5 is 4 bytes. A map entry is a message with the key as
field 1 and the value as field 2. Int64List's values are packed (one length-delimited field).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

# Field numbers of tf.train.Example (example.proto / feature.proto).
_EXAMPLE_FEATURES = 1   # Example.features
_FEATURES_MAP = 1       # Features.feature (map<string, Feature>)
_ENTRY_KEY, _ENTRY_VALUE = 1, 2
_FEATURE_BYTES, _FEATURE_INT64 = 1, 3  # Feature.bytes_list, Feature.int64_list
_LIST_VALUE = 1         # BytesList.value, Int64List.value

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

IMAGE_KEY = b"image"
SIZE_KEY = b"size"


class ProtoError(ValueError):
    """The bytes are not the Example this module writes (or a compatible one)."""


def varint(value: int) -> bytes:
    """The protobuf varint encoding of a non-negative integer."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _len_field(field: int, body_len: int) -> bytes:
    """Key and length of a length-delimited field whose body of ``body_len`` bytes follows."""
    return varint(field << 3 | _LEN) + varint(body_len)


def _entry(key: bytes, feature_field: int, list_body_len: int) -> bytes:
    """A Features map entry (key, Feature, list) up to but not including the list's body."""
    value_list = _len_field(_LIST_VALUE, list_body_len)
    feature = _len_field(feature_field, len(value_list) + list_body_len)
    value = _len_field(_ENTRY_VALUE, len(feature) + len(value_list) + list_body_len)
    entry = _len_field(_ENTRY_KEY, len(key)) + key + value + feature + value_list
    return _len_field(_FEATURES_MAP, len(entry) + list_body_len) + entry


@functools.lru_cache(maxsize=1024)
def example_prefix(image_len: int) -> bytes:
    """Serialized Example bytes that precede an image of ``image_len`` bytes.

    ``example_prefix(len(image)) + image`` is the whole serialized Example. Cached: a
    dataset's samples mostly share a few sizes.
    """
    size_body = varint(image_len)
    size_entry = _entry(SIZE_KEY, _FEATURE_INT64, len(size_body)) + size_body
    image_prefix = _entry(IMAGE_KEY, _FEATURE_BYTES, image_len)
    features_len = len(size_entry) + len(image_prefix) + image_len
    return _len_field(_EXAMPLE_FEATURES, features_len) + size_entry + image_prefix


def _read_varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    """Decode the varint at ``pos``: (value, position after it)."""
    value = shift = 0
    while pos < end and shift < 64:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise ProtoError("truncated or overlong varint")


def _fields(buf: memoryview, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field, wire type, start, stop) of each field in ``buf[pos:end]``.

    For length-delimited fields start:stop is the body; for varints start is the value.
    """
    while pos < end:
        key, pos = _read_varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if wire == _LEN:
            size, pos = _read_varint(buf, pos, end)
            start, pos = pos, pos + size
        elif wire == _VARINT:
            start, pos = _read_varint(buf, pos, end)
        elif wire in (_I64, _I32):
            start, pos = pos, pos + (8 if wire == _I64 else 4)
        else:
            raise ProtoError(f"unsupported wire type {wire}")
        if pos > end:
            raise ProtoError("a field runs past the end of its message")
        yield field, wire, start, pos


def _only_len(buf: memoryview, pos: int, end: int, field: int,
              first: bool = False) -> tuple[int, int]:
    """Body of a length-delimited ``field``: the last one (a singular field's rule) or the
    ``first`` (a repeated field's first value)."""
    found = None
    for number, wire, start, stop in _fields(buf, pos, end):
        if number == field and wire == _LEN:
            found = (start, stop)
            if first:
                break
    if found is None:
        raise ProtoError(f"field {field} is missing")
    return found


def _size_value(buf: memoryview, pos: int, end: int) -> int:
    """The first value of the Int64List in a Feature body (packed or not)."""
    start, stop = _only_len(buf, pos, end, _FEATURE_INT64)
    for number, wire, a, b in _fields(buf, start, stop):
        if number == _LIST_VALUE and wire == _LEN:
            return _read_varint(buf, a, b)[0]
        if number == _LIST_VALUE and wire == _VARINT:
            return a
    raise ProtoError("the size feature holds no value")


def _map_entries(buf: memoryview, pos: int, end: int) -> Iterator[tuple[bytes, int, int]]:
    """(key, start, stop of the Feature body) of each entry in a Features message."""
    for number, wire, start, stop in _fields(buf, pos, end):
        if number != _FEATURES_MAP or wire != _LEN:
            continue
        key, value = b"", (stop, stop)
        for sub, sub_wire, a, b in _fields(buf, start, stop):
            if sub == _ENTRY_KEY and sub_wire == _LEN:
                key = bytes(buf[a:b])
            elif sub == _ENTRY_VALUE and sub_wire == _LEN:
                value = (a, b)
        yield key, value[0], value[1]


@functools.lru_cache(maxsize=1024)
def _own_prefix(example_len: int) -> bytes | None:
    """The prefix ``example_prefix`` writes in an Example of ``example_len`` bytes, if any."""
    width = len(example_prefix(example_len))  # the prefix only shrinks with the image
    for prefix_len in range(min(width, example_len), max(width - 8, 0), -1):
        prefix = example_prefix(example_len - prefix_len)
        if len(prefix) == prefix_len:
            return prefix
    return None


def find_image(buf: memoryview, pos: int, end: int, check_size: bool = True) -> tuple[int, int]:
    """Start and stop of the "image" bytes in the serialized Example ``buf[pos:end]``.

    Checks the "size" feature, when present and ``check_size``, against the image's length
    (DLIO writes the image's side length there, not its bytes). An Example that is
    byte for byte what ``example_prefix`` writes is recognised without parsing it.
    """
    own = _own_prefix(end - pos)
    if own is not None and buf[pos:pos + len(own)] == own:
        return pos + len(own), end
    return parse_image(buf, pos, end, check_size)


def parse_image(buf: memoryview, pos: int, end: int, check_size: bool = True) -> tuple[int, int]:
    """``find_image`` by walking the protobuf fields (any valid encoding of the Example)."""
    features = _only_len(buf, pos, end, _EXAMPLE_FEATURES)
    image = None
    size = None
    for key, start, stop in _map_entries(buf, *features):
        if key == IMAGE_KEY:
            list_start, list_stop = _only_len(buf, start, stop, _FEATURE_BYTES)
            image = _only_len(buf, list_start, list_stop, _LIST_VALUE, first=True)
        elif key == SIZE_KEY:
            size = _size_value(buf, start, stop)
    if image is None:
        raise ProtoError('the Example has no "image" feature')
    if check_size and size is not None and size != image[1] - image[0]:
        raise ProtoError(f'"size" says {size} bytes but "image" holds {image[1] - image[0]}')
    return image
