"""The built-in models: registered from their training output, idempotently, fitting the pass."""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort
import pytest

from mlbridge.inliner.policy import LinearPolicy
from mlbridge.models import Registry, check_compatible
from mlbridge.models.builtin import ensure_builtin_models
from mlbridge.problems import builtin_models
from mlbridge.tensor_spec import TensorSpec

BUILTIN_MODELS = builtin_models()

# LLVM 22's ML inliner features (as the mlbridge inline advisor and stock opt send them).
INLINER_FEATURES = [
    "sroa_savings",
    "sroa_losses",
    "load_elimination",
    "call_penalty",
    "call_argument_setup",
    "load_relative_intrinsic",
    "lowered_call_arg_setup",
    "indirect_call_penalty",
    "jump_table_penalty",
    "case_cluster_penalty",
    "switch_default_dest_penalty",
    "switch_penalty",
    "unsimplified_common_instructions",
    "num_loops",
    "dead_blocks",
    "simplified_instructions",
    "constant_args",
    "constant_offset_ptr_args",
    "callsite_cost",
    "cold_cc_penalty",
    "last_call_to_static_bonus",
    "is_multiple_blocks",
    "nested_inlines",
    "nested_inline_cost_estimate",
    "threshold",
    "callee_basic_block_count",
    "callsite_height",
    "node_count",
    "nr_ctant_params",
    "cost_estimate",
    "edge_count",
    "caller_users",
    "caller_conditionally_executed_blocks",
    "caller_basic_block_count",
    "callee_conditionally_executed_blocks",
    "callee_users",
    "is_callee_avail_external",
    "is_caller_avail_external",
    "inlining_default",
]


INLINERS = [m for m in BUILTIN_MODELS if m.task == "inliner"]
PHASE_ORDER = [m for m in BUILTIN_MODELS if m.task == "phase-order"]
REGALLOC = [m for m in BUILTIN_MODELS if m.task == "regalloc"]


def test_every_builtin_policy_loads_and_uses_only_inliner_features():
    for model in INLINERS:
        policy = LinearPolicy.load(model.policy_path)
        assert set(policy.features) <= set(INLINER_FEATURES), model.name
        assert policy.active_features(), model.name


def test_builtins_are_registered_once_and_fit_the_inline_advisor(tmp_path: Path):
    registry = Registry(tmp_path / "registry")
    first = ensure_builtin_models(BUILTIN_MODELS, registry)
    names = [n for m in INLINERS for n in (m.name, f"{m.name}-native", f"{m.name}-aot")]
    names += [n for m in PHASE_ORDER for n in (m.name, f"{m.name}-native")]
    # The agents' native form is their own compiler's (mlbridge.regalloc.native).
    names += [n for m in REGALLOC for n in (m.name, f"{m.name}-native")]
    assert [m.name for m in first] == names
    assert [m.kind for m in first] == ["onnx", "native", "tfaot"] * len(INLINERS) + [
        "onnx",
        "native",
    ] * (len(PHASE_ORDER) + len(REGALLOC))
    tasks = {m.name: m.task for m in first}
    assert all(tasks[f"{b.name}-native"] == b.task for b in BUILTIN_MODELS if b.native)
    assert all(tasks[b.name] == b.task for b in BUILTIN_MODELS)
    stamp = {m.name: m.registered_at for m in first}
    second = ensure_builtin_models(BUILTIN_MODELS, registry)
    # Built from the same training output: nothing registered again.
    assert {m.name: m.registered_at for m in second} == stamp
    features = [TensorSpec(n, "int64_t", (1,)) for n in INLINER_FEATURES]
    for model in second[: 3 * len(INLINERS)]:
        assert check_compatible(features, model.features) == []
        assert [a.name for a in model.advice] == ["inlining_decision"]
        if model.kind == "onnx":
            session = ort.InferenceSession(str(model.path), providers=["CPUExecutionProvider"])
            assert [o.name for o in session.get_outputs()] == ["inlining_decision"]


def test_the_phase_order_agent_fits_the_pass_interface(tmp_path: Path):
    """phase-order-oz reads the pass's features (all but action_count) and answers action."""
    from mlbridge.phase_order.policy import PhasePolicy

    (builtin,) = PHASE_ORDER
    policy = PhasePolicy.load(builtin.policy_path)
    n = policy.n_actions
    pass_features = [
        TensorSpec("observation", "float", (policy.dim,)),
        TensorSpec("step", "int64_t", (1,)),
        TensorSpec("code_size", "int64_t", (1,)),
        TensorSpec("action_count", "int64_t", (1,)),
        TensorSpec("action_history", "float", (n,)),
    ]
    registry = Registry(tmp_path / "registry")
    ensure_builtin_models(BUILTIN_MODELS, registry, tfaot=False)
    model = registry.get(builtin.name)
    assert model.kind == "onnx"
    assert check_compatible(pass_features, model.features) == []
    assert [a.name for a in model.advice] == ["action"]


def test_the_regalloc_agents_fit_the_allocators_interface_with_a_split_agent(tmp_path: Path):
    """regalloc-split reads the allocator's features and answers all three agents."""
    from mlbridge.regalloc import advice_spec, feature_specs
    from mlbridge.regalloc.gnn import RegallocGNN

    (builtin,) = REGALLOC
    assert RegallocGNN.load(builtin.policy_path).split
    # Not the unused function_name and spill_weights.
    model_inputs_read = ["agent", "node_features", "edges", "node", "register_features",
                         "block_features", "action_mask"]  # fmt: skip
    registry = Registry(tmp_path / "registry")
    ensure_builtin_models(BUILTIN_MODELS, registry, tfaot=False)
    model = registry.get(builtin.name)
    assert (model.kind, model.task) == ("onnx", "regalloc")
    assert check_compatible(list(feature_specs()), model.features) == []
    assert [a.name for a in model.advice] == [advice_spec().name]
    # Its native form (the network's own compiler) reads what the network reads.
    native = registry.get(f"{builtin.name}-native")
    assert (native.kind, native.task) == ("native", "regalloc")
    assert check_compatible(list(feature_specs()), native.features) == []
    assert {f.name for f in native.features} == set(model_inputs_read)
    assert [a.name for a in native.advice] == [advice_spec().name]


def test_an_onnx_builtin_without_its_ort_format_copy_is_registered_again(tmp_path: Path):
    """A registry from before ORT-format copies (or for another ONNX Runtime) gets one."""
    from mlbridge.models.ort_format import ort_format_copy_path

    registry = Registry(tmp_path / "registry")
    ensure_builtin_models(REGALLOC, registry, tfaot=False)
    model = registry.get(REGALLOC[0].name)
    copy = ort_format_copy_path(model.path, ort.__version__)
    assert copy.is_file()
    copy.unlink()
    ensure_builtin_models(REGALLOC, registry, tfaot=False)
    assert copy.is_file()
    assert copy.stat().st_mtime_ns >= registry.get(model.name).path.stat().st_mtime_ns


def test_the_builtin_model_of_a_task_is_found_by_task_not_position():
    from mlbridge.models.registry import RegistryError
    from mlbridge.problems import builtin_model

    assert builtin_model("inliner").name == "inliner-oz"
    assert builtin_model("phase-order").name == "phase-order-oz"
    assert builtin_model("regalloc").name == "regalloc-split"
    with pytest.raises(RegistryError, match="no built-in model for task 'mlir-loop-unroll'"):
        builtin_model("mlir-loop-unroll")


def test_a_builtin_is_built_again_when_its_exporter_changes(tmp_path: Path):
    """A registered form made by older export code is replaced; the same code keeps it."""
    from dataclasses import replace

    exporter = tmp_path / "export.py"
    exporter.write_text("# the export, version 1\n")
    model = replace(REGALLOC[0], exporter=(exporter,))
    registry = Registry(tmp_path / "registry")
    (first,) = ensure_builtin_models([model], registry, tfaot=False, native=False)
    assert "[exporter sha256 " in (first.description or "")
    (kept,) = ensure_builtin_models([model], registry, tfaot=False, native=False)
    assert kept.description == first.description
    exporter.write_text("# the export, version 2\n")
    (rebuilt,) = ensure_builtin_models([model], registry, tfaot=False, native=False)
    assert rebuilt.description != first.description
    assert registry.get(model.name).description == rebuilt.description


def test_every_builtin_names_its_export_code():
    """Each built-in lists the files that make its forms, and they exist."""
    for model in BUILTIN_MODELS:
        assert model.exporter, model.name
        assert all(f.is_file() for f in model.exporter), model.exporter
