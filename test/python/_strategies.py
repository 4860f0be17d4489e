"""Hypothesis strategies for tensors and record streams shared by the tests."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mlbridge import ElementType, Tensor, TensorSpec
from mlbridge.serdes import Context, End, Header, Message, MessageKind

NAMES = st.text(
    alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")),
    min_size=1,
    max_size=12,
)


def element_strategy(etype: ElementType, *, utf8: bool) -> st.SearchStrategy:
    if etype is ElementType.STRING:
        if utf8:
            return st.text(max_size=8).map(lambda s: s.encode("utf-8"))
        return st.binary(max_size=8)
    if etype is ElementType.BOOL:
        return st.booleans()
    if etype.is_floating:
        width = 32 if etype is ElementType.FLOAT else 64
        return st.floats(width=width, allow_nan=False) | st.just(float("nan"))
    info = np.iinfo(etype.numpy_dtype)
    return st.integers(int(info.min), int(info.max))


def values(etype: ElementType, shape: tuple[int, ...], *, utf8: bool) -> st.SearchStrategy:
    if etype is ElementType.STRING:
        n = int(np.prod(shape))
        return st.lists(element_strategy(etype, utf8=utf8), min_size=n, max_size=n).map(
            lambda items: Tensor.from_strings("v", shape, items).array
        )
    return hnp.arrays(etype.numpy_dtype, shape, elements=element_strategy(etype, utf8=utf8))


@st.composite
def tensors(
    draw: st.DrawFn,
    name: str | None = None,
    etype: ElementType | None = None,
    shape: tuple[int, ...] | None = None,
    *,
    utf8: bool = False,
) -> Tensor:
    name = draw(NAMES) if name is None else name
    etype = draw(st.sampled_from(list(ElementType))) if etype is None else etype
    if shape is None:
        shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    return Tensor(name, etype, draw(values(etype, shape, utf8=utf8)))


@st.composite
def specs(draw: st.DrawFn, names: st.SearchStrategy[str] = NAMES) -> TensorSpec:
    etype = draw(st.sampled_from(list(ElementType)))
    shape = tuple(draw(st.lists(st.integers(-1, 3), max_size=3)))
    return TensorSpec(draw(names), etype, shape)


@st.composite
def concrete(draw: st.DrawFn, spec: TensorSpec, *, utf8: bool) -> Tensor:
    shape = tuple(d if d >= 0 else draw(st.integers(0, 3)) for d in spec.shape)
    return draw(tensors(spec.name, spec.type, shape, utf8=utf8))


@st.composite
def streams(draw: st.DrawFn, *, utf8: bool = False, max_messages: int = 4) -> list:
    """A header, a context, then messages that match the header, and an end record."""
    features = draw(st.lists(specs(), max_size=4, unique_by=lambda s: s.name))
    advice = draw(st.none() | specs())
    score = draw(st.none() | specs())
    header = Header(tuple(features), advice=advice, score=score)
    records: list = [header, Context(draw(st.text(max_size=10)))]
    kinds = [MessageKind.OBSERVATION]
    if advice is not None:
        kinds.append(MessageKind.ADVICE)
    if score is not None:
        kinds.append(MessageKind.OUTCOME)
    for _ in range(draw(st.integers(0, max_messages))):
        if draw(st.booleans()):
            records.append(Context(draw(st.text(max_size=6))))
        kind = draw(st.sampled_from(kinds))
        msg_id = draw(st.integers(0, 2**63 - 1))
        specs_ = header.specs_for(kind) or ()
        ts = tuple(draw(concrete(s, utf8=utf8)) for s in specs_)
        records.append(Message(kind, msg_id, ts))
    if draw(st.booleans()):
        records.append(End())
    return records
