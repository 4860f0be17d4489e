"""Helpers shared by the two line-based formats (bitstream and JSON)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import orjson

from mlbridge.errors import LimitExceededError, MalformedInputError, MLBridgeError
from mlbridge.serdes.base import MAX_EMPTY_SHAPE_PRODUCT, DecodeLimits
from mlbridge.serdes.records import Context, End, Header
from mlbridge.tensor_spec import DYNAMIC, TensorSpec

INT64_MAX = 2**63 - 1

END_LINE = b'{"end":true}\n'
KIND_KEYS = ("observation", "outcome", "advice")


def header_line(header: Header) -> bytes:
    """The header line: LLVM's exact bytes, terminated by newline."""
    parts = [b'{"features":[', b",".join(s.to_json() for s in header.features), b"]"]
    if header.score is not None:
        parts += [b',"score":', header.score.to_json()]
    if header.advice is not None:
        parts += [b',"advice":', header.advice.to_json()]
    parts.append(b"}\n")
    return b"".join(parts)


def context_line(context: Context) -> bytes:
    """The context line, terminated by newline."""
    return b'{"context":' + orjson.dumps(context.name) + b"}\n"


#: A JSON string (an unterminated one runs to the end of the line) or a bracket.
_STRING_OR_BRACKET = re.compile(rb'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)
_OPEN = frozenset(b"[{")


def check_depth(line: bytes | bytearray | memoryview, offset: int, limits: DecodeLimits) -> None:
    """Refuse a line that nests JSON arrays and objects deeper than ``limits.max_depth``.

    A lexical scan done before any parser sees the line (brackets inside strings do not
    count; a closing bracket at depth 0 is ignored), the same scan as the C++ decoders'.

    Raises:
        LimitExceededError: If the line nests deeper than ``max_depth``.
    """
    data = bytes(line)
    if data.count(b"[") + data.count(b"{") <= limits.max_depth:
        return  # the usual line: too few brackets to nest too deep
    depth = 0
    for token in _STRING_OR_BRACKET.findall(data):
        if token[0] == 0x22:
            continue  # a string
        if token[0] in _OPEN:
            depth += 1
            if depth > limits.max_depth:
                raise LimitExceededError(
                    f"line at byte offset {offset} nests JSON arrays and objects more than "
                    f"{limits.max_depth} deep (max_depth={limits.max_depth})"
                )
        elif depth:
            depth -= 1


def parse_line(line: bytes, offset: int) -> dict[str, Any]:
    """Parse a record line into a JSON object, or raise :class:`MalformedInputError`."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise MalformedInputError(f"invalid JSON in record at byte offset {offset}: {e}") from None
    if not isinstance(obj, dict) or not obj:
        raise MalformedInputError(
            f"record at byte offset {offset} is not a non-empty JSON object: {line[:80]!r}"
        )
    check_duplicate_keys(line, obj, offset)
    return obj


def _key_count(obj: dict[str, Any]) -> int:
    """The keys of ``obj`` and of the objects in it (not looking into lists of values)."""
    count, stack = 0, [obj]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            count += len(v)
            stack.extend(v.values())
        elif type(v) is list and v and type(v[0]) in (dict, list):
            stack.extend(v)
    return count


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen.add(key)
    return dict(pairs)


class _DuplicateKey(Exception):
    pass


#: JSON whitespace before a colon: it hides a key from a line's ``":`` count.
_SPACED_COLON = re.compile(rb"[ \t\r\n]:")


def has_spaced_colon(line: bytes | bytearray) -> bool:
    """Whether ``line`` has whitespace before a colon (then its ``":`` count is no key count)."""
    return _SPACED_COLON.search(line) is not None


def check_duplicate_keys(line: bytes, obj: dict[str, Any], offset: int) -> None:
    """Refuse a line whose JSON objects repeat a key, as the C++ decoder does.

    orjson keeps the last of duplicate keys; so does llvm::json, but the C++ side checks
    every value it sees, so both refuse duplicates. Cheap when there are none: the line's
    ``":`` count equals the parsed keys (only a string holding ``":``, whitespace before
    a colon or a duplicate makes them differ, and only then is the line parsed again).
    Whitespace before a colon is checked for on its own: it hides a key from the count,
    so with a duplicate the two could match.

    Raises:
        MalformedInputError: Naming the key.
    """
    if line.count(b'":') == _key_count(obj) and not has_spaced_colon(line):
        return
    try:
        json.loads(line, object_pairs_hook=_refuse_duplicates)
    except _DuplicateKey as e:
        raise MalformedInputError(
            f"line at byte offset {offset} has a duplicate key {e.args[0]!r} in an object"
        ) from None
    except ValueError:  # what orjson reads, json may not (nothing here is duplicated)
        return


def _spec(obj: object, where: str, offset: int) -> TensorSpec:
    try:
        return TensorSpec.from_dict(obj)  # type: ignore[arg-type]
    except MLBridgeError as e:
        raise MalformedInputError(f"header at byte offset {offset}: {where}: {e}") from None


def parse_header(obj: dict[str, Any], offset: int, limits: DecodeLimits) -> Header:
    """Build a :class:`Header` from its parsed line."""
    unknown = set(obj) - {"features", "score", "advice"}
    if unknown:
        raise MalformedInputError(
            f"header at byte offset {offset} has unknown keys {sorted(unknown)}"
        )
    features = obj["features"]
    if not isinstance(features, list):
        raise MalformedInputError(f"header at byte offset {offset}: 'features' must be a list")
    limits.check_tensor_count(len(features), offset)
    specs = tuple(_spec(f, f"feature {i}", offset) for i, f in enumerate(features))
    optional = {
        key: None if obj.get(key) is None else _spec(obj[key], key, offset)
        for key in ("score", "advice")
    }
    # Every malformed spec before any limit, as the C++ decoder: a header with several
    # faults gets the same error class from both.
    all_specs = (*specs, *(s for s in optional.values() if s is not None))
    check_spec_shapes(all_specs, offset)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise MalformedInputError(f"header at byte offset {offset}: duplicate feature {dup!r}")
    check_spec_limits(all_specs, limits, offset)
    return Header(specs, advice=optional["advice"], score=optional["score"])


def check_spec_shapes(specs: Iterable[TensorSpec], offset: int) -> None:
    """Refuse a header spec with a dimension or an element count that is not an int64.

    A zero dimension makes no elements, however large the others (as in C++).

    Raises:
        MalformedInputError: Naming the spec.
    """
    for spec in specs:
        count = nonzero = 1
        for d in spec.shape:
            if d > INT64_MAX:
                raise MalformedInputError(
                    f"header at byte offset {offset}: spec {spec.name!r} has dimension {d}, "
                    "which is not an int64"
                )
            if d != DYNAMIC:
                count *= d
                nonzero *= d or 1
        if count > INT64_MAX or (not count and nonzero > MAX_EMPTY_SHAPE_PRODUCT):
            raise MalformedInputError(
                f"header at byte offset {offset}: tensor spec {spec.name!r} has too many elements"
            )


def check_spec_limits(specs: Iterable[TensorSpec], limits: DecodeLimits, offset: int) -> None:
    """Refuse a header spec above ``max_rank`` or with a dimension above ``max_dim``.

    Raises:
        LimitExceededError: Naming the spec and the limit.
    """
    for spec in specs:
        if spec.rank > limits.max_rank:
            raise LimitExceededError(
                f"header at byte offset {offset}: spec {spec.name!r} has rank {spec.rank}, "
                f"more than max_rank={limits.max_rank}"
            )
        for d in spec.shape:
            if d > limits.max_dim:
                raise LimitExceededError(
                    f"header at byte offset {offset}: spec {spec.name!r} has dimension {d}, "
                    f"more than max_dim={limits.max_dim}"
                )


def parse_simple(obj: dict[str, Any], offset: int) -> Context | End | None:
    """Parse a context or end line; ``None`` if ``obj`` is neither."""
    if "context" in obj:
        if len(obj) != 1 or not isinstance(obj["context"], str):
            raise MalformedInputError(
                f'context record at byte offset {offset} must be {{"context":<string>}}'
            )
        return Context(obj["context"])
    if "end" in obj:
        if len(obj) != 1 or obj["end"] is not True:
            raise MalformedInputError(f'end record at byte offset {offset} must be {{"end":true}}')
        return End()
    return None


def message_kind_key(obj: dict[str, Any], offset: int) -> str:
    """The kind key of a message line, or :class:`MalformedInputError`."""
    key = next(iter(obj))
    if key not in KIND_KEYS:
        raise MalformedInputError(
            f"record at byte offset {offset} starts with unknown key {key!r} (expected one of "
            "features, context, observation, outcome, advice, end)"
        )
    return key
