"""The exact JSON description of records used by the shared test vectors.

``test/vectors/cases.json`` and the cross-language tool (``mlbridge-serdes-tool``) describe
records in a form that leaves nothing to interpretation: every tensor is given by its raw
little-endian bytes in hex (``"raw"``) or by its string elements in hex (``"strings"``)::

    {"header": {"features": [<spec>, ...], "advice": <spec>|null, "score": <spec>|null}}
    {"context": "main"}
    {"message": {"kind": "observation", "id": 0, "tensors": [
        {"name": "x", "type": "int64_t", "shape": [1], "raw": "0100000000000000"}]}}
    {"end": true}
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mlbridge.errors import MLBridgeError, SpecError
from mlbridge.serdes.records import Context, End, Header, Message, MessageKind, Record
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import ElementType, TensorSpec

__all__ = ["Case", "case_from_json", "case_to_json", "record_from_json", "record_to_json"]


@dataclass(frozen=True)
class Case:
    """One test case: a name, the SerDes it applies to, and its records."""

    name: str
    serdes: tuple[str, ...]
    records: tuple[Record, ...]


def tensor_to_json(tensor: Tensor) -> dict[str, Any]:
    """Describe a tensor exactly (hex of its raw bytes or of its string elements)."""
    obj: dict[str, Any] = {
        "name": tensor.name,
        "type": tensor.type.llvm_name,
        "shape": list(tensor.shape),
    }
    if tensor.type is ElementType.STRING:
        obj["strings"] = [s.hex() for s in tensor.strings()]
    else:
        obj["raw"] = tensor.to_bytes().hex()
    return obj


def tensor_from_json(obj: dict[str, Any]) -> Tensor:
    """Build a tensor from its exact description."""
    etype = ElementType.from_llvm_name(obj["type"])
    shape = tuple(obj["shape"])
    if etype is ElementType.STRING:
        return Tensor.from_strings(obj["name"], shape, (bytes.fromhex(s) for s in obj["strings"]))
    return Tensor.from_bytes(obj["name"], etype, shape, bytes.fromhex(obj["raw"]))


def record_to_json(record: Record) -> dict[str, Any]:
    """Describe a record as a JSON-ready object."""
    if isinstance(record, Header):
        return {
            "header": {
                "features": [s.to_dict() for s in record.features],
                "advice": None if record.advice is None else record.advice.to_dict(),
                "score": None if record.score is None else record.score.to_dict(),
            }
        }
    if isinstance(record, Context):
        return {"context": record.name}
    if isinstance(record, Message):
        return {
            "message": {
                "kind": record.kind.value,
                "id": record.id,
                "tensors": [tensor_to_json(t) for t in record.tensors],
            }
        }
    if isinstance(record, End):
        return {"end": True}
    raise TypeError(f"not a record: {record!r}")


def record_from_json(obj: dict[str, Any]) -> Record:
    """Build a record from its JSON description; :class:`MLBridgeError` if invalid."""
    try:
        if "header" in obj:
            h = obj["header"]
            advice, score = h.get("advice"), h.get("score")
            return Header(
                tuple(TensorSpec.from_dict(s) for s in h["features"]),
                advice=None if advice is None else TensorSpec.from_dict(advice),
                score=None if score is None else TensorSpec.from_dict(score),
            )
        if "context" in obj:
            return Context(obj["context"])
        if "message" in obj:
            m = obj["message"]
            return Message(
                MessageKind(m["kind"]), m["id"], tuple(tensor_from_json(t) for t in m["tensors"])
            )
        if obj.get("end") is True:
            return End()
    except MLBridgeError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise SpecError(f"invalid record description {obj!r}: {e!r}") from None
    raise SpecError(f"invalid record description {obj!r}")


def case_from_json(obj: dict[str, Any]) -> Case:
    """Build a :class:`Case` from its entry in ``cases.json``."""
    return Case(
        obj["name"],
        tuple(obj.get("serdes", ())),
        tuple(record_from_json(r) for r in obj["records"]),
    )


def case_to_json(
    name: str, records: Iterable[Record], serdes: Iterable[str] = ()
) -> dict[str, Any]:
    """Describe a case (the ``serdes`` list is omitted when empty)."""
    obj: dict[str, Any] = {"name": name}
    serdes = list(serdes)
    if serdes:
        obj["serdes"] = serdes
    obj["records"] = [record_to_json(r) for r in records]
    return obj
