"""A graph policy for both agents of the ML register allocator, in plain PyTorch.

:class:`RegallocGNN` reads the allocator's observation (:mod:`mlbridge.regalloc.interface`):

* a **node encoder**, a two-layer perceptron over the node features after a fixed
  transform inside the network (``log1p`` of every column, scaled to about [0, 1]), so that
  the exported graph takes the raw ``node_features`` the allocator sends;
* ``rounds`` (default 2) rounds of **message passing** over ``edges``, both directions,
  with mean aggregation (the neighbours' embeddings summed by ``scatter_add``, ONNX
  ``ScatterND`` with reduction add, divided by the ``degree`` column, which the allocator
  keeps equal to each node's number of edges):
  ``h <- relu(W_self h + W_nb mean_nb(h)) + h``; a decision about one node (coloring,
  split) passes messages only into the nodes its embedding depends on
  (:meth:`RegallocGNN.embed`'s ``needed``), with the same result;
* a **priority head**: one score per node from ``[h, x]`` (its embedding and transformed
  features), a perceptron plus a linear term in ``x``;
* a **coloring head**: one score per candidate register from ``[h_v, x_v, reg_r]`` (the
  colored node ``v``'s embedding and features, the register's transformed features), a
  perceptron plus a linear term in ``reg_r``, and a spill score from ``[h_v, x_v]``.

Illegal actions (``action_mask`` 0) score :data:`ILLEGAL_SCORE`, a large negative finite
number (a softmax gives them probability 0, with no infinities or NaNs in gradients). The
deterministic action is the argmax, the first of equal maxima, where scores within a
relative :data:`TIE_TOLERANCE` of the best count as equal (:func:`first_best`: PyTorch and
ONNX Runtime round equal live ranges' scores differently).

:meth:`RegallocGNN.to_onnx` writes the whole interface as one ONNX model: each head is
exported by PyTorch's TorchScript exporter (with the shared trunk), then both become the
branches of an ``If`` on ``agent``, as :mod:`mlbridge.regalloc.onnx_policy` builds the
basic policy; the branches read the outer graph's inputs. Any other agent (an allocator
with a split agent, ``agent`` 2) gets the last action, spilling, as from the basic policy.
N, E and R are dynamic (E = 0 and R = 0 work). :func:`agreement` checks the export
against the PyTorch policy.

Needs PyTorch (the ``torch`` extra); ``mlbridge.regalloc`` does not import this module.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mlbridge._onnxruntime import import_onnxruntime
from mlbridge.errors import MLBridgeError
from mlbridge.export.weights import shortest_decimals
from mlbridge.regalloc.interface import (
    ADVICE,
    BLOCK_FEATURES,
    MASK,
    MESSAGE_ROUNDS_METADATA,
    NODE_FEATURES,
    REGISTER_FEATURES,
    Agent,
    feature_specs,
)
from mlbridge.regalloc.onnx_policy import IR_VERSION, OPSET
from mlbridge.tensor_spec import ElementType

__all__ = [
    "GNN_FORMAT",
    "ILLEGAL_SCORE",
    "TIE_TOLERANCE",
    "Batch",
    "RegallocGNN",
    "agreement",
    "collate",
    "compact_observation",
    "first_best",
    "onnx_feeds",
    "onnx_model",
]

#: The ``format`` of the JSON a policy is saved as.
GNN_FORMAT = "mlbridge-regalloc-gnn-1"
#: The score of an illegal action: finite, far below any legal score.
ILLEGAL_SCORE = -1.0e9
#: The deterministic action is the first whose score is within ``TIE_TOLERANCE * (1 +
#: |best|)`` of the best: equal actions (live ranges with the same features and
#: neighbourhood) get scores a rounding apart, which PyTorch and ONNX Runtime round
#: differently; with the tolerance both take the first of them.
TIE_TOLERANCE = 1e-5

Array = np.ndarray[Any, np.dtype[Any]]
Obs = Mapping[str, Any]

# Divisors of log1p(column) for node_features, bringing usual values near [0, 1]:
# weight (up to 1e6 = log1p 13.8), spillable, log_size, segments, instructions, queued,
# assigned, spilled, degree, class_size, has_hint.
_NODE_SCALE = (8.0, 1.0, 3.0, 3.0, 4.0, 1.0, 1.0, 1.0, 5.0, 4.0, 1.0)
_FREE, _HINTED, _EVICT, _CSR, _ORDER = (
    REGISTER_FEATURES.index(n) for n in ("free", "hinted", "evict_cost", "first_csr_use", "order")
)
_WEIGHT = NODE_FEATURES.index("weight")
_DEGREE = NODE_FEATURES.index("degree")
#: Columns of the transformed node features.
_NODE_INPUTS = len(NODE_FEATURES) + 1
#: Transformed register features: free, hinted, log1p(evict cost)/8, illegal (cost < 0),
#: first_csr_use, order.
_REGISTER_INPUTS = 6
_BLOCK = {name: i for i, name in enumerate(BLOCK_FEATURES)}
#: Transformed block features: frequency/8, log1p(uses)/3, log1p(live_in),
#: log1p(live_out), log1p(instructions), log1p(calls), region, the split's saving and
#: whether it is positive (see :func:`block_inputs`).
_BLOCK_INPUTS = 9

assert len(_NODE_SCALE) == len(NODE_FEATURES)


def _mlp(inputs: int, hidden: int, outputs: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(inputs, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, outputs)
    )


def node_inputs(node_features: torch.Tensor) -> torch.Tensor:
    """The network's transform of raw ``node_features`` [N, 11] to [N, 12].

    ``log1p`` of every column, scaled to about [0, 1], then ``log(weight + 1e-4) / 10``:
    spill weights are mostly far below 1, where ``log1p`` would leave nearly equal weights
    (the basic policy's priority order) nearly equal.
    """
    scale = torch.tensor(_NODE_SCALE, dtype=torch.float32)
    weight = torch.relu(node_features[:, _WEIGHT : _WEIGHT + 1])
    return torch.cat(
        [torch.log1p(torch.relu(node_features)) / scale, torch.log(weight + 1e-4) / 10.0], dim=1
    )


def register_inputs(register_features: torch.Tensor) -> torch.Tensor:
    """The network's transform of raw ``register_features`` [R, 5] to [R, 6]."""
    cost = register_features[:, _EVICT : _EVICT + 1]
    return torch.cat(
        [
            register_features[:, _FREE : _FREE + 1],
            register_features[:, _HINTED : _HINTED + 1],
            torch.log1p(torch.relu(cost)) / 8.0,
            (cost < 0).to(torch.float32),
            register_features[:, _CSR : _CSR + 1],
            register_features[:, _ORDER : _ORDER + 1],
        ],
        dim=1,
    )


def block_inputs(block_features: torch.Tensor) -> torch.Tensor:
    """The network's transform of raw ``block_features`` [S, 7] to [S, 9].

    A region's row has frequency-weighted counts (its copies too, hence ``log1p`` of
    ``live_in`` and ``live_out``: 0 or 0.69 for a block's row). The last two columns are
    the saving :func:`mlbridge.regalloc.policy.split_gains` computes, ``(uses - live_in -
    live_out) * (2**frequency - 1)``, as ``sign * log1p(|saving|) / 8``, and whether it is
    positive: the split policy's whole rule (the largest saving, if positive) is then two
    weights away, however small the saving.
    """
    column = {name: block_features[:, i : i + 1] for name, i in _BLOCK.items()}
    saving = (column["uses"] - column["live_in"] - column["live_out"]) * (
        torch.pow(2.0, column["frequency"]) - 1.0
    )
    return torch.cat(
        [
            column["frequency"] / 8.0,
            torch.log1p(torch.relu(column["uses"])) / 3.0,
            torch.log1p(torch.relu(column["live_in"])),
            torch.log1p(torch.relu(column["live_out"])),
            torch.log1p(torch.relu(column["instructions"])),
            torch.log1p(torch.relu(column["calls"])),
            column["region"],
            torch.sign(saving) * torch.log1p(torch.abs(saving)) / 8.0,
            (saving > 0).to(torch.float32),
        ],
        dim=1,
    )


class _ScatterNDAdd(torch.autograd.Function):
    """``data`` with ``updates[i]`` added to row ``index[i]``, for the ONNX export.

    Exported as ``ScatterND`` with ``reduction="add"``: PyTorch's own export of an
    accumulating ``index_put`` drops the reduction, and its ``scatter_add`` becomes
    ``ScatterElements``, which ONNX Runtime runs tens of times slower. Only used while
    exporting: no backward.
    """

    @staticmethod
    def forward(ctx: Any, data: torch.Tensor, index: torch.Tensor, updates: torch.Tensor) -> Any:
        return data.index_put((index,), updates, accumulate=True)

    @staticmethod
    def symbolic(g: Any, data: Any, index: Any, updates: Any) -> Any:
        axes = g.op("Constant", value_t=torch.tensor([1], dtype=torch.int64))
        return g.op("ScatterND", data, g.op("Unsqueeze", index, axes), updates, reduction_s="add")


def _scatter_add_rows(
    data: torch.Tensor, index: torch.Tensor, updates: torch.Tensor
) -> torch.Tensor:
    """``data`` [N, ...] with each row ``updates[i]`` added to row ``index[i]``, in order."""
    if torch.onnx.is_in_onnx_export():
        return _ScatterNDAdd.apply(data, index, updates)
    if updates.dim() == 1:
        return data.scatter_add(0, index, updates)
    return data.scatter_add(0, index.unsqueeze(1).expand(-1, updates.shape[1]), updates)


class _Compress(torch.autograd.Function):
    """The rows of ``data`` where ``keep`` (bool, one per row) is true, for the export.

    Exported as ONNX ``Compress``: PyTorch exports boolean indexing through ``NonZero``,
    which ONNX Runtime runs several times slower. Only used while exporting.
    """

    @staticmethod
    def forward(ctx: Any, data: torch.Tensor, keep: torch.Tensor) -> Any:
        return data[keep]

    @staticmethod
    def symbolic(g: Any, data: Any, keep: Any) -> Any:
        return g.op("Compress", data, keep, axis_i=0)


def _compress_rows(data: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The rows of ``data`` where ``keep`` is true, in order."""
    if torch.onnx.is_in_onnx_export():
        return _Compress.apply(data, keep)
    return data[keep]


def _with_sources(nodes: torch.Tensor, sources: torch.Tensor) -> torch.Tensor:
    """``nodes`` (bool [N]) with the nodes ``sources`` (int64 [K]) added."""
    count = _scatter_add_rows(
        torch.zeros_like(nodes, dtype=torch.float32),
        sources,
        torch.ones_like(sources, dtype=torch.float32),
    )
    return torch.logical_or(nodes, count > 0)


def _only(node: torch.Tensor, node_features: torch.Tensor) -> torch.Tensor:
    """A bool [N], true only at ``node`` (int64 [1])."""
    rows = torch.zeros_like(node_features[:, 0])
    return _scatter_add_rows(rows, node.reshape(1), torch.ones_like(rows[:1])) > 0


def _last_action_only(mask: torch.Tensor) -> torch.Tensor:
    """Scores of an agent the policy does not know: only the last action (spilling)."""
    scores = torch.full(mask.shape, ILLEGAL_SCORE)
    scores[-1] = 0.0
    return scores


def first_best(scores: torch.Tensor) -> torch.Tensor:
    """The deterministic action of masked ``scores`` [A]: int64 [1] (see :data:`TIE_TOLERANCE`)."""
    top = torch.max(scores)
    near = scores >= top - TIE_TOLERANCE * (1.0 + torch.abs(top))
    return torch.argmax(near.to(torch.float32), dim=0, keepdim=True)  # the first of them


def _masked(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask > 0, scores, torch.full_like(scores, ILLEGAL_SCORE))


class RegallocGNN(torch.nn.Module):
    """The priority and coloring agents, and optionally the split agent, over the graph.

    Args:
        hidden: The width of the node embeddings and of the heads' hidden layers.
        rounds: Rounds of message passing.
        metadata: Free-form facts kept with the policy (training settings, results).
        split: Whether the policy has a split agent (a block head scoring each candidate
            block, and a head scoring spilling instead); without one it answers the split
            agent by spilling, as the basic policy does.
    """

    def __init__(
        self,
        hidden: int = 32,
        rounds: int = 2,
        metadata: dict[str, Any] | None = None,
        split: bool = False,
    ) -> None:
        super().__init__()
        if hidden < 1 or rounds < 0:
            raise ValueError(f"hidden must be positive and rounds >= 0, got {hidden}, {rounds}")
        self.hidden = hidden
        self.rounds = rounds
        self.split = split
        self.metadata: dict[str, Any] = dict(metadata or {})
        n = _NODE_INPUTS
        self.encoder = torch.nn.Sequential(
            torch.nn.Linear(n, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.ReLU(),
        )
        self.self_layers = torch.nn.ModuleList(
            torch.nn.Linear(hidden, hidden) for _ in range(rounds)
        )
        self.neighbour_layers = torch.nn.ModuleList(
            torch.nn.Linear(hidden, hidden, bias=False) for _ in range(rounds)
        )
        self.priority_head = _mlp(hidden + n, hidden, 1)
        self.register_head = _mlp(hidden + n + _REGISTER_INPUTS, hidden, 1)
        self.spill_head = _mlp(hidden + n, hidden, 1)
        # Linear terms beside the heads: an order by one feature (the basic policy's
        # weight, eviction cost, allocation order) is then one weight away.
        self.priority_linear = torch.nn.Linear(n, 1, bias=False)
        self.register_linear = torch.nn.Linear(_REGISTER_INPUTS, 1, bias=False)
        if split:
            self.block_head = _mlp(hidden + n + _BLOCK_INPUTS, hidden, 1)
            self.block_linear = torch.nn.Linear(_BLOCK_INPUTS, 1, bias=False)
            self.split_spill_head = _mlp(hidden + n, hidden, 1)

    # -- the network ------------------------------------------------------------------

    def embed(
        self,
        node_features: torch.Tensor,
        edges: torch.Tensor,
        needed: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Per-node ``[h, x]`` [N, hidden + 11] for raw features [N, 11] and edges [E, 2].

        With ``needed`` (bool [N]), only the needed nodes' rows are the embedding (the
        others are left unfinished): each round passes messages only into the nodes a
        needed node's embedding still depends on, along the same edges in the same
        order, so the needed rows equal the whole graph's bit for bit. One node's row
        alone: :meth:`embed_node`.
        """
        x = node_inputs(node_features)
        h = self.encoder(x)
        edges = edges.reshape(-1, 2)
        src = torch.cat([edges[:, 0], edges[:, 1]])
        dst = torch.cat([edges[:, 1], edges[:, 0]])
        flows = [(src, dst)] * self.rounds
        if needed is not None:
            # flows[r]: the edges into the nodes round r updates; those of the last
            # round go into the needed nodes, those of each round before it into these
            # nodes and their neighbours.
            nodes = needed
            for r in reversed(range(self.rounds)):
                keep = nodes.index_select(0, dst)
                flows[r] = (_compress_rows(src, keep), _compress_rows(dst, keep))
                if r:
                    nodes = _with_sources(nodes, flows[r][0])
        # The allocator's degree column counts each node's edges (one per interfering
        # live range, never removed): the mean needs no scatter of its own.
        degree = node_features[:, _DEGREE : _DEGREE + 1].clamp(min=1.0)
        for (into_src, into_dst), self_layer, neighbour_layer in zip(
            flows, self.self_layers, self.neighbour_layers, strict=True
        ):
            total = _scatter_add_rows(torch.zeros_like(h), into_dst, h.index_select(0, into_src))
            h = torch.relu(self_layer(h) + neighbour_layer(total / degree)) + h
        return torch.cat([h, x], dim=1)

    def embed_node(
        self, node_features: torch.Tensor, edges: torch.Tensor, node: torch.Tensor
    ) -> torch.Tensor:
        """The embedding row [1, hidden + 11] of ``node`` (int64 [1]) alone.

        ``embed(node_features, edges)[node]``, computed only over the rows it reads: the
        nodes it depends on, re-indexed in their order, with messages along the same
        edges in the same order. A coloring or split decision then costs its node's
        neighbourhood, not the graph (its encoder too; on cmark-gfm's graphs of 1,400
        live ranges, 190 us a decision in ONNX Runtime before). The floats may differ
        from the whole graph's in the last bit: PyTorch's kernels round a matrix of a
        few rows and one of many differently.
        """
        n = node_features.shape[0]
        edges = edges.reshape(-1, 2)
        src = torch.cat([edges[:, 0], edges[:, 1]])
        dst = torch.cat([edges[:, 1], edges[:, 0]])
        if self.rounds <= 1:
            return self._embed_one_hop(node_features, src, dst, node)
        flows: list[tuple[torch.Tensor, torch.Tensor]] = []
        # The rows each round updates: into the node last, into it and its neighbours
        # before; ``rows`` ends as every row the first round reads.
        rows = _only(node, node_features)
        for r in reversed(range(self.rounds)):
            keep = dst == node.reshape(1) if r == self.rounds - 1 else rows.index_select(0, dst)
            flows.insert(0, (_compress_rows(src, keep), _compress_rows(dst, keep)))
            rows = _with_sources(rows, flows[0][0])
        index = _compress_rows(torch.arange(n), rows)
        local = _scatter_add_rows(
            torch.zeros(n, dtype=torch.int64), index, torch.arange(index.shape[0])
        )
        features = node_features.index_select(0, index)
        x = node_inputs(features)
        h = self.encoder(x)
        degree = features[:, _DEGREE : _DEGREE + 1].clamp(min=1.0)
        for (into_src, into_dst), self_layer, neighbour_layer in zip(
            flows, self.self_layers, self.neighbour_layers, strict=True
        ):
            into_src, into_dst = local.index_select(0, into_src), local.index_select(0, into_dst)
            total = _scatter_add_rows(torch.zeros_like(h), into_dst, h.index_select(0, into_src))
            h = torch.relu(self_layer(h) + neighbour_layer(total / degree)) + h
        at = local.index_select(0, node.reshape(1))
        return torch.cat([h.index_select(0, at), x.index_select(0, at)], dim=1)

    def _embed_one_hop(
        self, node_features: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, node: torch.Tensor
    ) -> torch.Tensor:
        """:meth:`embed_node` with at most one round of message passing.

        The rows are the node's, then one per edge into it (its source's), in the edges'
        order: no re-indexing (a row listed twice is computed twice alike).
        """
        sources = _compress_rows(src, dst == node.reshape(1))
        features = node_features.index_select(0, torch.cat([node.reshape(1), sources]))
        x = node_inputs(features)
        h = self.encoder(x)
        hv, xv = h[:1], x[:1]
        for self_layer, neighbour_layer in zip(
            self.self_layers, self.neighbour_layers, strict=True
        ):
            # Added up in the edges' order, as the whole graph's scatter does.
            total = _scatter_add_rows(torch.zeros_like(hv), torch.zeros_like(sources), h[1:])
            degree = features[:1, _DEGREE : _DEGREE + 1].clamp(min=1.0)
            hv = torch.relu(self_layer(hv) + neighbour_layer(total / degree)) + hv
        return torch.cat([hv, xv], dim=1)

    def priority_scores(self, z: torch.Tensor) -> torch.Tensor:
        """One score per node [N] from :meth:`embed`'s [N, D] (unmasked)."""
        x = z[:, self.hidden :]
        return (self.priority_head(z) + self.priority_linear(x)).squeeze(1)

    def register_scores(self, zv: torch.Tensor, regs: torch.Tensor) -> torch.Tensor:
        """One score per candidate [R] from its node's [R, D] and transformed features."""
        rows = torch.cat([zv, regs], dim=1)
        return (self.register_head(rows) + self.register_linear(regs)).squeeze(1)

    def coloring_scores(self, zv: torch.Tensor, register_features: torch.Tensor) -> torch.Tensor:
        """Scores [R + 1] (registers, then spill) of the node ``zv`` [1, D] (unmasked)."""
        regs = register_inputs(register_features.reshape(-1, len(REGISTER_FEATURES)))
        return torch.cat(
            [
                self.register_scores(zv.expand(regs.shape[0], -1), regs),
                self.spill_head(zv).reshape(1),
            ],
            dim=0,
        )

    def block_scores(self, zv: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
        """One score per candidate block [S] from its node's [S, D] and transformed features."""
        rows = torch.cat([zv, blocks], dim=1)
        return (self.block_head(rows) + self.block_linear(blocks)).squeeze(1)

    def split_scores(self, zv: torch.Tensor, block_features: torch.Tensor) -> torch.Tensor:
        """Scores [S + 1] (blocks, then spill) of the node ``zv`` [1, D] (unmasked)."""
        blocks = block_inputs(block_features.reshape(-1, len(BLOCK_FEATURES)))
        return torch.cat(
            [
                self.block_scores(zv.expand(blocks.shape[0], -1), blocks),
                self.split_spill_head(zv).reshape(1),
            ],
            dim=0,
        )

    def priority_logits(
        self, node_features: torch.Tensor, edges: torch.Tensor, action_mask: torch.Tensor
    ) -> torch.Tensor:
        """The priority agent's masked scores [N]."""
        # The whole graph: narrowed to the queued nodes, the last round keeps about half
        # the edges, and picking them out costs ONNX Runtime more than it saves.
        z = self.embed(node_features, edges)
        return _masked(self.priority_scores(z), action_mask)

    def coloring_logits(
        self,
        node_features: torch.Tensor,
        edges: torch.Tensor,
        node: torch.Tensor,
        register_features: torch.Tensor,
        action_mask: torch.Tensor,
    ) -> torch.Tensor:
        """The coloring agent's masked scores [R + 1]."""
        zv = self.embed_node(node_features, edges, node)
        return _masked(self.coloring_scores(zv, register_features), action_mask)

    def split_logits(
        self,
        node_features: torch.Tensor,
        edges: torch.Tensor,
        node: torch.Tensor,
        block_features: torch.Tensor,
        action_mask: torch.Tensor,
    ) -> torch.Tensor:
        """The split agent's masked scores [S + 1] (a policy with :attr:`split`)."""
        zv = self.embed_node(node_features, edges, node)
        return _masked(self.split_scores(zv, block_features), action_mask)

    # -- numpy in, numpy out ----------------------------------------------------------

    def logits(self, obs: Obs) -> torch.Tensor:
        """The masked scores [A] of one observation (feature name to value)."""
        # Copies: observations read from the pipe may be read-only views.
        nf = torch.tensor(np.array(obs["node_features"], dtype=np.float32)).reshape(
            -1, len(NODE_FEATURES)
        )
        edges = torch.tensor(np.array(obs["edges"], dtype=np.int64)).reshape(-1, 2)
        mask = torch.tensor(np.array(obs[MASK], dtype=np.int64)).reshape(-1)
        agent = int(np.asarray(obs["agent"]).reshape(-1)[0])
        if agent == Agent.PRIORITY:
            return self.priority_logits(nf, edges, mask)
        node = torch.tensor(np.array(obs["node"], dtype=np.int64)).reshape(1)
        if agent == Agent.SPLIT and self.split:
            blocks = torch.tensor(np.array(obs["block_features"], dtype=np.float32))
            return self.split_logits(nf, edges, node, blocks, mask)
        if agent != Agent.COLORING:
            return _last_action_only(mask)
        regs = torch.tensor(np.array(obs["register_features"], dtype=np.float32))
        return self.coloring_logits(nf, edges, node, regs, mask)

    def probabilities(self, obs: Obs, temperature: float = 1.0) -> Array:
        """The masked softmax of the scores divided by ``temperature`` (float64 [A])."""
        with torch.no_grad():
            p = torch.softmax(self.logits(obs) / temperature, dim=0)
        return p.numpy().astype(np.float64)

    def act(self, obs: Obs) -> int:
        """The deterministic action (:func:`first_best`), what the ONNX export answers."""
        with torch.no_grad():
            return int(first_best(self.logits(obs))[0])

    def forward(self, obs: Obs) -> Array:
        """The advice for ``drive_compiler``: int64 ``[1]``, the deterministic action.

        So the policy itself is a model side: ``drive_compiler(command, policy)``.
        """
        return np.array([self.act(obs)], dtype=np.int64)

    # -- batches ----------------------------------------------------------------------

    def batch_scores(self, batch: Batch) -> torch.Tensor:
        """The masked scores of every action of every sample of ``batch``, flat.

        Computes every graph of ``batch`` at once (their disjoint union) with the same
        network as :meth:`logits`; ``batch.segment`` says whose action each score is.
        """
        z = self.embed(batch.node_features, batch.edges)
        pool = [self.priority_scores(z)]
        if batch.coloring_nodes.numel():
            zv = z.index_select(0, batch.coloring_nodes)
            regs = register_inputs(batch.register_features)
            pool += [
                self.register_scores(zv.index_select(0, batch.register_owner), regs),
                self.spill_head(zv).squeeze(1),
            ]
        if batch.split_nodes.numel():
            if not self.split:
                raise ValueError("the batch has split samples but the policy no split agent")
            zv = z.index_select(0, batch.split_nodes)
            blocks = block_inputs(batch.block_features)
            pool += [
                self.block_scores(zv.index_select(0, batch.block_owner), blocks),
                self.split_spill_head(zv).squeeze(1),
            ]
        return _masked(torch.cat(pool).index_select(0, batch.flat_index), batch.mask)

    def batch_log_probs(
        self, batch: Batch, temperature: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability of each sample's action and each sample's entropy, [B] each.

        The masked softmax of :meth:`batch_scores` divided by ``temperature``, per sample.
        """
        scores = _masked(self.batch_scores(batch) / temperature, batch.mask)
        seg, count = batch.segment, batch.size
        top = torch.full((count,), ILLEGAL_SCORE).scatter_reduce(
            0, seg, scores.detach(), reduce="amax"
        )
        shifted = scores - top.index_select(0, seg)
        total = torch.zeros(count).scatter_add(0, seg, torch.exp(shifted))
        logp = shifted - torch.log(total).index_select(0, seg)
        entropy = -torch.zeros(count).scatter_add(0, seg, torch.exp(logp) * logp)
        return logp.index_select(0, batch.chosen), entropy

    def batch_actions(self, batch: Batch) -> torch.Tensor:
        """Each sample's deterministic action (as :meth:`act`), int64 [B]."""
        with torch.no_grad():
            scores = self.batch_scores(batch)
            seg, count = batch.segment, batch.size
            top = torch.full((count,), ILLEGAL_SCORE).scatter_reduce(0, seg, scores, reduce="amax")
            threshold = top - TIE_TOLERANCE * (1.0 + torch.abs(top))
            position = torch.arange(scores.shape[0])
            best = torch.where(
                scores >= threshold.index_select(0, seg),
                position,
                torch.full_like(position, scores.shape[0]),
            )
            first = torch.full((count,), scores.shape[0]).scatter_reduce(
                0, seg, best, reduce="amin"
            )
            return first - batch.starts

    # -- files ------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The policy as JSON-ready data (format, hyper-parameters, weights, metadata)."""
        return {
            "format": GNN_FORMAT,
            "hidden": self.hidden,
            "rounds": self.rounds,
            "split": self.split,
            "metadata": self.metadata,
            "weights": {k: shortest_decimals(v) for k, v in self.state_dict().items()},
        }

    def save(self, path: str | Path) -> Path:
        """Writes :meth:`to_json` to ``path``."""
        path = Path(path)
        path.write_text(json.dumps(self.to_json()) + "\n")
        return path

    @classmethod
    def from_json(cls, data: Any, source: str = "the policy") -> RegallocGNN:
        """The policy of :meth:`to_json`'s data.

        Raises:
            MLBridgeError: If ``data`` is not such a policy.
        """
        if not isinstance(data, dict) or data.get("format") != GNN_FORMAT:
            raise MLBridgeError(
                f"{source} is not a register-allocation policy (expected format "
                f"{GNN_FORMAT!r}; write one with 'mlbridge train regalloc')"
            )
        try:
            policy = cls(
                int(data["hidden"]),
                int(data["rounds"]),
                data.get("metadata"),
                split=bool(data.get("split", False)),
            )
            state = {k: torch.tensor(v, dtype=torch.float32) for k, v in data["weights"].items()}
            policy.load_state_dict(state)
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise MLBridgeError(f"{source} is a damaged register-allocation policy: {e}") from e
        policy.eval()
        return policy

    @classmethod
    def load(cls, path: str | Path) -> RegallocGNN:
        """Reads a policy written by :meth:`save`.

        Raises:
            MLBridgeError: If the file cannot be read or is not such a policy.
        """
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise MLBridgeError(f"cannot read the register-allocation policy {path}: {e}") from None
        return cls.from_json(data, str(path))

    def to_onnx(
        self,
        path: str | Path,
        coloring: RegallocGNN | None = None,
        split: RegallocGNN | None = None,
    ) -> Path:
        """Exports the deterministic policy as one ONNX model over the whole interface.

        The inputs are :func:`~mlbridge.regalloc.interface.feature_specs` (the unused
        ``function_name`` and ``spill_weights`` included), the output int64
        ``regalloc_action`` [1]; an ``If`` on ``agent`` runs the priority, the coloring or
        (a policy with :attr:`split`; else spilling) the split branch. Opset
        :data:`~mlbridge.regalloc.onnx_policy.OPSET`, IR version
        :data:`~mlbridge.regalloc.onnx_policy.IR_VERSION`. Its metadata
        :data:`~mlbridge.regalloc.interface.MESSAGE_ROUNDS_METADATA` declares the rounds
        of message passing, so that the allocator sends only the edges they read.

        Args:
            path: Where to write the model.
            coloring: Another policy whose coloring head (and trunk) the coloring branch
                runs (agents trained apart, e.g. by multi-agent PPO); default this one.
            split: Another policy, with :attr:`split`, whose split heads (and trunk) the
                split branch runs; default this one.
        """
        import onnx

        model = onnx_model(self, coloring, split)
        out = Path(path)
        onnx.save(model, str(out))
        return out


class _PriorityExport(torch.nn.Module):
    def __init__(self, policy: RegallocGNN) -> None:
        super().__init__()
        self.policy = policy

    def forward(
        self, node_features: torch.Tensor, edges: torch.Tensor, action_mask: torch.Tensor
    ) -> torch.Tensor:
        return first_best(self.policy.priority_logits(node_features, edges, action_mask))


class _ColoringExport(torch.nn.Module):
    def __init__(self, policy: RegallocGNN) -> None:
        super().__init__()
        self.policy = policy

    def forward(
        self,
        node_features: torch.Tensor,
        edges: torch.Tensor,
        node: torch.Tensor,
        register_features: torch.Tensor,
        action_mask: torch.Tensor,
    ) -> torch.Tensor:
        return first_best(
            self.policy.coloring_logits(node_features, edges, node, register_features, action_mask)
        )


class _SplitExport(torch.nn.Module):
    def __init__(self, policy: RegallocGNN) -> None:
        super().__init__()
        self.policy = policy

    def forward(
        self,
        node_features: torch.Tensor,
        edges: torch.Tensor,
        node: torch.Tensor,
        block_features: torch.Tensor,
        action_mask: torch.Tensor,
    ) -> torch.Tensor:
        return first_best(
            self.policy.split_logits(node_features, edges, node, block_features, action_mask)
        )


def _export_branch(module: torch.nn.Module, inputs: dict[str, torch.Tensor], prefix: str) -> Any:
    """``module`` exported by TorchScript tracing, as an ``If`` branch reading outer inputs."""
    import onnx
    from onnx.compose import add_prefix_graph

    dynamic = {
        "node_features": {0: "N"},
        "edges": {0: "E"},
        "register_features": {0: "R"},
        "block_features": {0: "S"},
        MASK: {0: "A"},
    }
    with tempfile.TemporaryDirectory(prefix="mlbridge-regalloc-onnx-") as tmp:
        path = os.path.join(tmp, "branch.onnx")
        with warnings.catch_warnings():
            # The TorchScript exporter is deprecated in favour of the dynamo one (which
            # needs onnxscript); its warnings say nothing about this model.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                tuple(inputs.values()),
                path,
                input_names=list(inputs),
                output_names=["action"],
                dynamic_axes={k: v for k, v in dynamic.items() if k in inputs},
                opset_version=OPSET,
                dynamo=False,
            )
        graph = onnx.load(path).graph
    # Every name but the inputs gets the prefix: the branch then reads the outer graph's
    # inputs by name, and nothing it defines shadows an outer name.
    branch = add_prefix_graph(graph, prefix, rename_inputs=False)
    del branch.input[:]
    branch.name = prefix.rstrip("/")
    return branch


def onnx_model(
    policy: RegallocGNN,
    coloring_policy: RegallocGNN | None = None,
    split_policy: RegallocGNN | None = None,
) -> Any:
    """The deterministic ``policy`` as an ``onnx.ModelProto`` (see :meth:`RegallocGNN.to_onnx`).

    The coloring branch is ``coloring_policy``'s if given (its own trunk and coloring
    head), else ``policy``'s; the split branch ``split_policy``'s if given, else
    ``policy``'s (spilling if that has no split agent).
    """
    import onnx
    from onnx import TensorProto, helper

    colorer = coloring_policy if coloring_policy is not None else policy
    splitter = split_policy if split_policy is not None else policy
    if split_policy is not None and not split_policy.split:
        raise ValueError("split_policy has no split agent (RegallocGNN(split=True))")
    agents = [policy, colorer, splitter]
    was_training = [a.training for a in agents]
    for a in agents:
        a.eval()
    # Example sizes above 1, so that tracing takes no dimension for a broadcast one.
    n, e, r = 4, 3, 3
    example = {
        "node_features": torch.rand(n, len(NODE_FEATURES)),
        "edges": torch.tensor([[0, 1], [1, 2], [0, 3]], dtype=torch.int64)[:e],
        "node": torch.tensor([1], dtype=torch.int64),
        "register_features": torch.rand(r, len(REGISTER_FEATURES)),
    }
    try:
        priority = _export_branch(
            _PriorityExport(policy),
            {
                "node_features": example["node_features"],
                "edges": example["edges"],
                MASK: torch.ones(n, dtype=torch.int64),
            },
            "priority/",
        )
        coloring = _export_branch(
            _ColoringExport(colorer),
            {**example, MASK: torch.ones(r + 1, dtype=torch.int64)},
            "coloring/",
        )
        split = (
            _export_branch(
                _SplitExport(splitter),
                {
                    "node_features": example["node_features"],
                    "edges": example["edges"],
                    "node": example["node"],
                    "block_features": torch.rand(r, len(BLOCK_FEATURES)),
                    MASK: torch.ones(r + 1, dtype=torch.int64),
                },
                "split/",
            )
            if splitter.split
            else None
        )
    finally:
        for a, was in zip(agents, was_training, strict=True):
            a.train(was)
    types = {
        ElementType.INT64: TensorProto.INT64,
        ElementType.FLOAT: TensorProto.FLOAT,
        ElementType.STRING: TensorProto.STRING,
    }
    inputs = [
        helper.make_tensor_value_info(
            s.name,
            types[s.type],
            [d if d >= 0 else f"{s.name}_{i}" for i, d in enumerate(s.shape)],
        )
        for s in feature_specs()
    ]

    def constant(name: str, value: int) -> Any:
        return helper.make_node(
            "Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, (1,), [value])
        )

    # The split agent of a policy without one: the last action, spilling.
    last = (
        split
        if split is not None
        else helper.make_graph(
            [
                helper.make_node("Shape", [MASK], ["other/size"]),
                constant("other/one", 1),
                helper.make_node("Sub", ["other/size", "other/one"], ["other/action"]),
            ],
            "other",
            [],
            [helper.make_tensor_value_info("other/action", TensorProto.INT64, [1])],
        )
    )
    not_priority = helper.make_graph(
        [
            constant("agent_coloring", 1),
            helper.make_node("Equal", ["agent", "agent_coloring"], ["is_coloring"]),
            helper.make_node(
                "If", ["is_coloring"], ["not_priority/action"], then_branch=coloring,
                else_branch=last,
            ),
        ],
        "not_priority",
        [],
        [helper.make_tensor_value_info("not_priority/action", TensorProto.INT64, [1])],
    )  # fmt: skip
    graph = helper.make_graph(
        [
            constant("agent_priority", 0),
            helper.make_node("Equal", ["agent", "agent_priority"], ["is_priority"]),
            helper.make_node(
                "If", ["is_priority"], [ADVICE], then_branch=priority, else_branch=not_priority
            ),
        ],
        "mlbridge_regalloc_gnn",
        inputs,
        [helper.make_tensor_value_info(ADVICE, TensorProto.INT64, [1])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="mlbridge.regalloc.gnn",
    )
    model.ir_version = IR_VERSION
    # Every decision reads only the embeddings of the nodes it is about (the queued ones,
    # or ``node``), so the allocator may leave out the edges that cannot reach them.
    rounds = max(a.rounds for a in (policy, colorer, *([splitter] if split else [])))
    helper.set_model_props(model, {MESSAGE_ROUNDS_METADATA: str(rounds)})
    onnx.checker.check_model(model, full_check=True)
    return model


# -- samples and batches ------------------------------------------------------------------


def compact_observation(obs: Obs, previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A small copy of the features the policy reads (``previous``'s edges reused if equal).

    An episode's edges change only when the spiller adds live ranges: sharing them with the
    previous sample keeps a recorded episode's memory near its node features'. Edges are
    kept as int32 (half the memory; node indices are far below 2**31).
    """
    edges = np.array(obs["edges"], dtype=np.int32).reshape(-1, 2)
    if previous is not None:
        old = previous["edges"]
        if old.shape == edges.shape and np.array_equal(old, edges):
            edges = old
    return {
        "agent": np.array(obs["agent"], dtype=np.int64).reshape(1),
        "node_features": np.array(obs["node_features"], dtype=np.float32).reshape(
            -1, len(NODE_FEATURES)
        ),
        "edges": edges,
        "node": np.array(obs["node"], dtype=np.int64).reshape(1),
        "register_features": np.array(obs["register_features"], dtype=np.float32).reshape(
            -1, len(REGISTER_FEATURES)
        ),
        "block_features": np.array(
            obs["block_features"] if "block_features" in obs else np.zeros((0,)),
            dtype=np.float32,
        ).reshape(-1, len(BLOCK_FEATURES)),
        MASK: np.array(obs[MASK], dtype=np.int64).reshape(-1),
        "function_name": np.array(obs["function_name"], dtype=object).reshape(1),
    }


class Batch:
    """Observations and their actions, collated for :meth:`RegallocGNN.batch_log_probs`.

    Attributes:
        size: The number of samples.
        node_features: Every sample's node features, stacked [sum N, 11].
        edges: Every sample's edges, offset to the stacked nodes [sum E, 2].
        coloring_nodes: The colored node of each coloring sample (stacked index).
        register_features: Every coloring sample's candidates [sum R, 5].
        register_owner: The coloring sample (its index among them) of each candidate.
        split_nodes: The node being split of each split sample (stacked index).
        block_features: Every split sample's candidate blocks [sum S, 6].
        block_owner: The split sample (its index among them) of each candidate block.
        flat_index: Every sample's actions, in order, as indices into the concatenation
            of all node scores, all register scores, all spill scores, all block scores
            and all split samples' spill scores.
        segment: The sample of each flat action.
        mask: The action mask of each flat action.
        starts: The flat index of each sample's first action.
        chosen: The flat index of each sample's action.
    """

    def __init__(self, samples: Sequence[Obs], actions: Sequence[int]) -> None:
        if len(samples) != len(actions):
            raise ValueError(f"{len(samples)} samples but {len(actions)} actions")
        nfs, edges, regs, owners, colored = [], [], [], [], []
        blocks, block_owners, splitting = [], [], []
        node_base = 0
        sizes_n = [np.asarray(s["node_features"]).reshape(-1, len(NODE_FEATURES)) for s in samples]
        total_n = sum(x.shape[0] for x in sizes_n)
        agents = [int(np.asarray(s["agent"]).reshape(-1)[0]) for s in samples]
        total_r = sum(
            np.asarray(s["register_features"]).reshape(-1, len(REGISTER_FEATURES)).shape[0]
            for s, a in zip(samples, agents, strict=True)
            if a == Agent.COLORING
        )
        total_c = agents.count(Agent.COLORING)
        total_s = sum(
            np.asarray(s["block_features"]).reshape(-1, len(BLOCK_FEATURES)).shape[0]
            for s, a in zip(samples, agents, strict=True)
            if a == Agent.SPLIT
        )
        n_coloring = n_split = 0
        reg_base = block_base = 0
        # Where each kind of score starts in the concatenation (see flat_index).
        block_start = total_n + total_r + total_c
        flat, segment, masks, chosen, starts = [], [], [], [], []
        position = 0
        for i, (s, nf, action) in enumerate(zip(samples, sizes_n, actions, strict=True)):
            n = nf.shape[0]
            nfs.append(nf)
            edges.append(np.asarray(s["edges"], dtype=np.int64).reshape(-1, 2) + node_base)
            mask = np.asarray(s[MASK], dtype=np.int64).reshape(-1)
            agent = agents[i]
            if agent not in (Agent.PRIORITY, Agent.COLORING, Agent.SPLIT):
                raise ValueError(f"sample {i}: agent {agent} is not priority, coloring or split")
            if agent == Agent.PRIORITY:
                index = np.arange(node_base, node_base + n)
            elif agent == Agent.SPLIT:
                bf = np.asarray(s["block_features"], dtype=np.float32).reshape(
                    -1, len(BLOCK_FEATURES)
                )
                b = bf.shape[0]
                blocks.append(bf)
                block_owners.append(np.full(b, n_split, dtype=np.int64))
                splitting.append(node_base + int(np.asarray(s["node"]).reshape(-1)[0]))
                index = np.concatenate(
                    [
                        np.arange(block_start + block_base, block_start + block_base + b),
                        [block_start + total_s + n_split],
                    ]
                )
                block_base += b
                n_split += 1
            else:
                rf = np.asarray(s["register_features"], dtype=np.float32).reshape(
                    -1, len(REGISTER_FEATURES)
                )
                r = rf.shape[0]
                regs.append(rf)
                owners.append(np.full(r, n_coloring, dtype=np.int64))
                colored.append(node_base + int(np.asarray(s["node"]).reshape(-1)[0]))
                index = np.concatenate(
                    [
                        np.arange(total_n + reg_base, total_n + reg_base + r),
                        [total_n + total_r + n_coloring],
                    ]
                )
                reg_base += r
                n_coloring += 1
            if index.shape[0] != mask.shape[0]:
                raise ValueError(
                    f"sample {i}: {mask.shape[0]} mask entries for {index.shape[0]} actions"
                )
            if not 0 <= int(action) < index.shape[0]:
                raise ValueError(f"sample {i}: action {action} out of {index.shape[0]}")
            flat.append(index)
            segment.append(np.full(index.shape[0], i, dtype=np.int64))
            masks.append(mask)
            starts.append(position)
            chosen.append(position + int(action))
            position += index.shape[0]
            node_base += n
        self.size = len(samples)
        self.node_features = torch.from_numpy(np.concatenate(nfs).astype(np.float32))
        self.edges = torch.from_numpy(np.concatenate(edges) if edges else np.zeros((0, 2), int))
        self.coloring_nodes = torch.tensor(colored, dtype=torch.int64)
        self.register_features = torch.from_numpy(
            np.concatenate(regs) if regs else np.zeros((0, len(REGISTER_FEATURES)), np.float32)
        )
        self.register_owner = torch.from_numpy(
            np.concatenate(owners) if owners else np.zeros(0, np.int64)
        )
        self.split_nodes = torch.tensor(splitting, dtype=torch.int64)
        self.block_features = torch.from_numpy(
            np.concatenate(blocks) if blocks else np.zeros((0, len(BLOCK_FEATURES)), np.float32)
        )
        self.block_owner = torch.from_numpy(
            np.concatenate(block_owners) if block_owners else np.zeros(0, np.int64)
        )
        self.flat_index = torch.from_numpy(np.concatenate(flat).astype(np.int64))
        self.segment = torch.from_numpy(np.concatenate(segment))
        self.mask = torch.from_numpy(np.concatenate(masks))
        self.chosen = torch.tensor(chosen, dtype=torch.int64)
        self.starts = torch.tensor(starts, dtype=torch.int64)


def collate(samples: Sequence[Obs], actions: Sequence[int]) -> Batch:
    """The :class:`Batch` of ``samples`` (observations) and their ``actions``."""
    return Batch(samples, actions)


def agreement(
    policy: RegallocGNN,
    onnx_path: str | Path,
    samples: Sequence[Obs],
    coloring: RegallocGNN | None = None,
    split: RegallocGNN | None = None,
) -> tuple[float, int]:
    """How often the exported model answers as the PyTorch policy's argmax on ``samples``.

    With ``coloring`` or ``split`` (the model of :meth:`RegallocGNN.to_onnx` with them),
    that policy answers the coloring or split samples.

    Returns:
        The fraction of equal decisions, and the number of samples.
    """
    ort = import_onnxruntime()

    if not samples:
        return 1.0, 0
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    equal = 0
    for s in samples:
        (got,) = session.run([ADVICE], onnx_feeds(s))
        agent = int(np.asarray(s["agent"]).reshape(-1)[0])
        who = policy
        if coloring is not None and agent == Agent.COLORING:
            who = coloring
        elif split is not None and agent == Agent.SPLIT:
            who = split
        equal += int(int(np.asarray(got).reshape(-1)[0]) == who.act(s))
    return equal / len(samples), len(samples)


def onnx_feeds(obs: Obs) -> dict[str, Array]:
    """ONNX Runtime's feeds of one observation (every feature of the interface)."""
    n = len(np.asarray(obs["node_features"]).reshape(-1)) // len(NODE_FEATURES)
    # The model reads neither; a compact sample keeps no spill weights.
    weights = obs["spill_weights"] if "spill_weights" in obs else np.zeros(n, np.float32)
    name = obs["function_name"] if "function_name" in obs else [""]
    return {
        "agent": np.asarray(obs["agent"], dtype=np.int64).reshape(1),
        "function_name": np.asarray(name, dtype=object).reshape(1),
        "node_features": np.asarray(obs["node_features"], dtype=np.float32).reshape(
            -1, len(NODE_FEATURES)
        ),
        "edges": np.asarray(obs["edges"], dtype=np.int64).reshape(-1, 2),
        "spill_weights": np.asarray(weights, dtype=np.float32).reshape(-1),
        "node": np.asarray(obs["node"], dtype=np.int64).reshape(1),
        "register_features": np.asarray(obs["register_features"], dtype=np.float32).reshape(
            -1, len(REGISTER_FEATURES)
        ),
        # The split agent's candidates (none for the agents the policy knows).
        "block_features": np.asarray(
            obs["block_features"] if "block_features" in obs else np.zeros((0, 0)),
            dtype=np.float32,
        ).reshape(-1, len(BLOCK_FEATURES)),
        MASK: np.asarray(obs[MASK], dtype=np.int64).reshape(-1),
    }
