"""Reading a model file's specs: ``mlbridge.models.specs``.

The models here are real: ONNX models built with the ``onnx`` package, shared objects
compiled with the system C compiler (their C ABI answers the questions
``read_tfaot_abi_specs`` asks), sidecar JSON as ``mlbridge aot`` and ``mlbridge compile``
write it. Made up are the files a check must refuse (cut, wrong bytes) and the 64-byte
header of a big-endian shared object: the ELF check reads only the header, and building
a real one would need a cross linker.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import orjson
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_models import compile_shared_object, shared_object, write_sidecar  # noqa: F401

from mlbridge.models import (
    ModelFileError,
    read_onnx_specs,
    read_specs_file,
    read_tfaot_abi_specs,
    read_tfaot_specs,
)
from mlbridge.models.specs import guess_kind, read_ir2vec_vocab_specs, sidecar_path
from mlbridge.tensor_spec import ElementType, TensorSpec

SPEC_X = {"name": "x", "type": "int32_t", "port": 0, "shape": [1, 33]}
SPEC_Y = {"name": "y", "type": "float", "port": 0, "shape": [1]}


def at(path: Path) -> str:
    """A pattern matching ``path`` at the start of an error message."""
    return "^" + re.escape(str(path))


def save_onnx(path: Path, graph: onnx.GraphProto) -> Path:
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def write_json(path: Path, obj: object) -> Path:
    path.write_bytes(orjson.dumps(obj))
    return path


# -- guess_kind and the sidecar ---------------------------------------------------------


def test_a_versioned_so_name_is_a_shared_object_whatever_its_bytes(tmp_path: Path) -> None:
    # Told from the name, so that reading it says what is wrong with the file.
    versioned = tmp_path / "libpolicy.so.1"
    versioned.write_bytes(b"not an ELF file")
    assert guess_kind(versioned) == "tfaot"


def test_a_so_whose_sidecar_says_native_is_native(
    tmp_path: Path,
    shared_object: Path,  # noqa: F811 - the fixture
) -> None:
    so = tmp_path / "policy.so"
    shutil.copyfile(shared_object, so)
    write_json(tmp_path / "policy.specs.json", {"kind": "native", "features": [], "advice": []})
    assert guess_kind(so) == "native"


def test_a_so_whose_sidecar_says_tfaot_or_is_unreadable_is_tfaot(
    tmp_path: Path,
    shared_object: Path,  # noqa: F811 - the fixture
) -> None:
    so = tmp_path / "policy.so"
    shutil.copyfile(shared_object, so)
    assert guess_kind(so) == "tfaot"  # no sidecar
    sidecar = write_json(tmp_path / "policy.specs.json", {"kind": "tfaot"})
    assert guess_kind(so) == "tfaot"
    sidecar.write_bytes(b"{truncated")
    assert guess_kind(so) == "tfaot"
    write_json(sidecar, ["native"])
    assert guess_kind(so) == "tfaot"


def test_an_elf_file_without_suffix_is_told_by_its_magic(
    tmp_path: Path,
    shared_object: Path,  # noqa: F811 - the fixture
) -> None:
    plain = tmp_path / "policy"
    shutil.copyfile(shared_object, plain)
    assert guess_kind(plain) == "tfaot"


def test_an_elf_file_without_suffix_reads_its_sidecar_kind(
    tmp_path: Path,
    shared_object: Path,  # noqa: F811 - the fixture
) -> None:
    plain = tmp_path / "policy"
    shutil.copyfile(shared_object, plain)
    write_json(tmp_path / "policy.specs.json", {"kind": "native", "features": [], "advice": []})
    assert guess_kind(plain) == "native"


def test_a_file_of_unknown_name_and_bytes_has_no_kind(tmp_path: Path) -> None:
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\x7fEL")  # shorter than the ELF magic
    assert guess_kind(weights) is None
    assert guess_kind(tmp_path / "missing") is None


@pytest.mark.parametrize(
    ("name", "sidecar"),
    [
        ("policy.so", "policy.specs.json"),
        ("libpolicy.so.1", "libpolicy.so.specs.json"),
        ("policy", "policy.specs.json"),
        # C++'s sidecarPath (llvm::sys::path::replace_extension) takes ".so" for the
        # extension of a file named just ".so"; Path.stem would keep it.
        (".so", ".specs.json"),
    ],
)
def test_the_sidecar_replaces_the_last_extension_as_cpp_does(name: str, sidecar: str) -> None:
    assert sidecar_path(Path("models") / name) == Path("models") / sidecar


# -- IR2Vec vocabularies ----------------------------------------------------------------

VOCAB = {"Opcodes": {"Add": [0.1, 0.2]}, "Types": {"IntegerTy": [0.3]}, "Arguments": {"V": [1]}}


def test_an_ir2vec_vocabulary_has_no_specs(tmp_path: Path) -> None:
    specs = read_ir2vec_vocab_specs(write_json(tmp_path / "vocab.json", VOCAB))
    assert specs.features == () and specs.advice == ()


def test_a_vocabulary_that_is_not_json_is_named(tmp_path: Path) -> None:
    path = tmp_path / "vocab.json"
    path.write_bytes(b"{truncated")
    with pytest.raises(ModelFileError, match=at(path) + " is not an IR2Vec vocabulary: "):
        read_ir2vec_vocab_specs(path)


def test_a_vocabulary_that_is_a_json_list_is_refused(tmp_path: Path) -> None:
    path = write_json(tmp_path / "vocab.json", [VOCAB])
    with pytest.raises(ModelFileError, match=r"is not an IR2Vec vocabulary: no 'Opcodes' section"):
        read_ir2vec_vocab_specs(path)


def test_a_vocabulary_with_an_empty_section_is_refused(tmp_path: Path) -> None:
    path = write_json(tmp_path / "vocab.json", {**VOCAB, "Types": {}})
    with pytest.raises(ModelFileError, match=r"is not an IR2Vec vocabulary: no 'Types' section"):
        read_ir2vec_vocab_specs(path)


def test_a_missing_vocabulary_section_is_named_with_the_fix(tmp_path: Path) -> None:
    path = write_json(tmp_path / "vocab.json", {"Opcodes": VOCAB["Opcodes"], "Types": {}})
    with pytest.raises(
        ModelFileError,
        match=at(path) + r" is not an IR2Vec vocabulary: no 'Types' section "
        r"\(make one with `mlbridge ir2vec vocab`\)$",
    ):
        read_ir2vec_vocab_specs(path)


# -- ONNX -------------------------------------------------------------------------------


def test_onnx_specs_need_the_onnx_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [x])
    path = save_onnx(tmp_path / "m.onnx", graph)
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError
    with pytest.raises(
        ModelFileError, match=r"needs the onnx package \(pip install 'mlbridge\[onnx\]'\)"
    ):
        read_onnx_specs(path)


def test_a_missing_onnx_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "missing.onnx"
    with pytest.raises(ModelFileError, match=at(path) + " does not exist or is not a file$"):
        read_onnx_specs(path)


def test_an_onnx_input_that_is_not_a_tensor_is_named(tmp_path: Path) -> None:
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [1])
    n = helper.make_tensor_value_info("n", TensorProto.INT64, [])
    graph = helper.make_graph([helper.make_node("SequenceLength", ["s"], ["n"])], "g", [seq], [n])
    path = save_onnx(tmp_path / "seq.onnx", graph)
    with pytest.raises(
        ModelFileError,
        match=at(path) + r": input 's' is not a tensor \(it is a sequence_type\); "
        r"mlbridge feeds and reads only tensors$",
    ):
        read_onnx_specs(path)


def test_an_onnx_output_without_mlbridge_type_is_named_with_the_supported_types(
    tmp_path: Path,
) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    half = helper.make_tensor_value_info("h", TensorProto.FLOAT16, [1])
    cast = helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16)
    path = save_onnx(tmp_path / "half.onnx", helper.make_graph([cast], "g", [x], [half]))
    with pytest.raises(
        ModelFileError,
        match=at(path) + r": output 'h' has ONNX element type FLOAT16, which mlbridge has no "
        r"element type for \(supported: float, double, bool, string, signed and unsigned "
        r"8\.\.64-bit ints\)$",
    ):
        read_onnx_specs(path)


def test_an_onnx_input_with_a_negative_dimension_is_named(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["y"])], "g", [x], [y])
    path = save_onnx(tmp_path / "neg.onnx", graph)
    with pytest.raises(ModelFileError, match=at(path) + r": input 'x': .*dimension -5 is invalid"):
        read_onnx_specs(path)


def test_an_onnx_graph_whose_inputs_are_all_weights_has_no_inputs(tmp_path: Path) -> None:
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    weight = helper.make_tensor("w", TensorProto.FLOAT, [1], [2.0])
    identity = helper.make_node("Identity", ["w"], ["y"])
    path = save_onnx(
        tmp_path / "const.onnx", helper.make_graph([identity], "g", [w], [y], initializer=[weight])
    )
    with pytest.raises(
        ModelFileError, match=at(path) + " is not a usable model: its graph has no inputs$"
    ):
        read_onnx_specs(path)


def test_an_onnx_graph_without_outputs_is_refused(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [])
    path = save_onnx(tmp_path / "sink.onnx", graph)
    with pytest.raises(
        ModelFileError, match=at(path) + " is not a usable model: its graph has no outputs$"
    ):
        read_onnx_specs(path)


def external_weights_model(folder: Path) -> Path:
    """y = x + w, with w stored in ``m.onnx.data`` beside ``m.onnx``."""
    folder.mkdir()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], [w])
    path = folder / "m.onnx"
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
        str(path),
        save_as_external_data=True,
        location="m.onnx.data",
        size_threshold=0,
    )
    assert (folder / "m.onnx.data").is_file()
    return path


def test_onnx_external_weights_are_found_beside_the_model_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = external_weights_model(tmp_path / "model")
    monkeypatch.chdir(tmp_path)  # not the model's folder
    specs = read_onnx_specs(path)
    assert specs.features == (TensorSpec("x", ElementType.FLOAT, (4,)),)
    assert specs.advice == (TensorSpec("y", ElementType.FLOAT, (4,)),)


def test_onnx_external_weights_that_are_missing_are_named(tmp_path: Path) -> None:
    path = external_weights_model(tmp_path / "model")
    (tmp_path / "model" / "m.onnx.data").unlink()
    with pytest.raises(
        ModelFileError, match=at(path) + " is not a valid ONNX model: .*m.onnx.data"
    ):
        read_onnx_specs(path)


# -- specs files (sidecars) -------------------------------------------------------------


def test_a_missing_specs_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "missing.specs.json"
    with pytest.raises(
        ModelFileError,
        match=r"^cannot read the specs file " + re.escape(str(path)) + ": No such file",
    ):
        read_specs_file(path)


def test_a_specs_file_that_is_not_json_is_named(tmp_path: Path) -> None:
    path = tmp_path / "m.specs.json"
    path.write_bytes(b'{"features": [')
    with pytest.raises(
        ModelFileError, match=r"^the specs file " + re.escape(str(path)) + " is not valid JSON: "
    ):
        read_specs_file(path)


def test_a_specs_file_that_is_not_an_object_shows_the_expected_form(tmp_path: Path) -> None:
    path = write_json(tmp_path / "m.specs.json", [SPEC_X])
    with pytest.raises(
        ModelFileError,
        match=r"^the specs file " + re.escape(str(path)) + r" must be a JSON object "
        r'\{"features":\[\.\.\.\],"advice":\[\.\.\.\]\}$',
    ):
        read_specs_file(path)


def test_a_specs_file_of_kind_native_is_read(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "m.specs.json",
        {"name": "m", "kind": "native", "features": [SPEC_X], "advice": [SPEC_Y]},
    )
    specs = read_specs_file(path)
    assert specs.features == (TensorSpec("x", ElementType.INT32, (1, 33)),)
    assert specs.advice == (TensorSpec("y", ElementType.FLOAT, (1,)),)


def test_a_specs_file_of_another_kind_is_refused(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "m.specs.json", {"kind": "onnx", "features": [SPEC_X], "advice": [SPEC_Y]}
    )
    with pytest.raises(
        ModelFileError,
        match=r"^the specs file " + re.escape(str(path)) + r" is for a model of kind 'onnx', "
        r"not 'tfaot' or 'native'$",
    ):
        read_specs_file(path)


def test_a_missing_spec_list_names_the_file_and_key(tmp_path: Path) -> None:
    path = write_json(tmp_path / "m.specs.json", {"features": [SPEC_X]})
    with pytest.raises(
        ModelFileError,
        match=r"^the specs file " + re.escape(str(path)) + " has no 'advice' list$",
    ):
        read_specs_file(path)


def test_a_spec_list_that_is_not_a_list_names_the_file_and_key(tmp_path: Path) -> None:
    path = write_json(tmp_path / "m.specs.json", {"features": "x", "advice": [SPEC_Y]})
    with pytest.raises(
        ModelFileError,
        match=r"^the specs file " + re.escape(str(path)) + ": 'features' must be a list of "
        "tensor specs$",
    ):
        read_specs_file(path)


def test_a_bad_spec_names_the_file_key_and_index(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "m.specs.json", {"features": [SPEC_X], "advice": [SPEC_Y, {"name": "z"}]}
    )
    with pytest.raises(
        ModelFileError, match=r"^the specs file " + re.escape(str(path)) + r": advice\[1\]: "
    ):
        read_specs_file(path)


def test_one_spec_written_without_its_list_is_read_as_a_list_of_one(tmp_path: Path) -> None:
    path = write_json(tmp_path / "m.specs.json", {"features": [SPEC_X], "advice": SPEC_Y})
    assert read_specs_file(path).advice == (TensorSpec("y", ElementType.FLOAT, (1,)),)


def test_spec_names_given_twice_are_all_named(tmp_path: Path) -> None:
    features = [SPEC_X, SPEC_Y, {**SPEC_X, "port": 1}, {**SPEC_Y, "port": 1}, SPEC_Y]
    path = write_json(tmp_path / "m.specs.json", {"features": features, "advice": [SPEC_Y]})
    with pytest.raises(
        ModelFileError,
        match=r"^the specs file " + re.escape(str(path)) + ": 'features' names x, y more than "
        "once$",
    ):
        read_specs_file(path)


# -- shared objects ---------------------------------------------------------------------


def test_a_missing_shared_object_is_named(tmp_path: Path) -> None:
    path = tmp_path / "missing.so"
    with pytest.raises(ModelFileError, match=at(path) + " does not exist or is not a file$"):
        read_tfaot_specs(path)


def test_a_file_that_is_not_elf_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "fake.so"
    path.write_bytes(b"#!/bin/sh\n" * 4)
    write_sidecar(path, [SPEC_X], [SPEC_Y])
    with pytest.raises(
        ModelFileError,
        match=at(path) + r" is not a TF AOT model: it is not an ELF shared object "
        r"\(build one with `mlbridge aot`\)$",
    ):
        read_tfaot_specs(path)


@pytest.mark.parametrize("size", [4, 5, 17])
def test_a_file_cut_inside_the_elf_header_is_not_a_shared_object(
    tmp_path: Path,
    shared_object: Path,  # noqa: F811 - the fixture
    size: int,
) -> None:
    path = tmp_path / "cut.so"
    path.write_bytes(shared_object.read_bytes()[:size])
    write_sidecar(path, [SPEC_X], [SPEC_Y])
    with pytest.raises(ModelFileError, match=r"is not a TF AOT model: it is not an ELF shared"):
        read_tfaot_specs(path)


def test_an_elf_object_file_is_refused_as_not_a_shared_object(tmp_path: Path) -> None:
    source = tmp_path / "policy.c"
    source.write_text("int policy(int x) { return x + 1; }\n")
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang-22")
    assert cc is not None, "no C compiler (cc, gcc, clang-22)"
    path = tmp_path / "policy.so"  # named like a shared object, but `cc -c` output
    subprocess.run([cc, "-c", "-o", str(path), str(source)], check=True, timeout=60)
    write_sidecar(path, [SPEC_X], [SPEC_Y])
    with pytest.raises(
        ModelFileError,
        match=at(path) + r" is not a TF AOT model: it is an ELF file but not a shared object "
        r"\(build one with `mlbridge aot`\)$",
    ):
        read_tfaot_specs(path)


def big_endian_shared_object(path: Path) -> Path:
    """The ELF header of a 64-bit big-endian (s390x) shared object, as ``file`` knows it."""
    ident = b"\x7fELF" + bytes([2, 2, 1]) + bytes(9)  # ELFCLASS64, ELFDATA2MSB, EV_CURRENT
    # e_type ET_DYN, e_machine EM_S390, e_version; the rest (entry, offsets) is 0.
    header = ident + (3).to_bytes(2, "big") + (22).to_bytes(2, "big") + (1).to_bytes(4, "big")
    path.write_bytes(header.ljust(64, b"\0"))
    return path


def test_a_big_endian_shared_object_is_accepted_with_its_sidecar(tmp_path: Path) -> None:
    path = big_endian_shared_object(tmp_path / "s390x.so")
    write_sidecar(path, [SPEC_X], [SPEC_Y])
    specs = read_tfaot_specs(path)
    assert specs.features == (TensorSpec("x", ElementType.INT32, (1, 33)),)


def test_a_shared_object_that_cannot_be_loaded_is_named(tmp_path: Path) -> None:
    # Without a sidecar its specs come from its C ABI, which needs it loaded.
    path = big_endian_shared_object(tmp_path / "s390x.so")
    with pytest.raises(ModelFileError, match=r"^cannot load " + re.escape(str(path)) + ": "):
        read_tfaot_specs(path)


def test_a_shared_object_without_sidecar_or_abi_is_refused_with_the_fix(
    tmp_path: Path,
    shared_object: Path,  # noqa: F811 - the fixture
) -> None:
    so = tmp_path / "evict.so"
    shutil.copyfile(shared_object, so)
    with pytest.raises(
        ModelFileError,
        match=at(so) + r" has no specs sidecar evict.specs.json beside it and does not export "
        r"the mlbridge AOT ABI \(mlbridge_aot_abi_version\); pass --specs SPECS.json \(the "
        r"file `mlbridge aot` writes\) to say which features and advice it has$",
    ):
        read_tfaot_specs(so)


# -- the C ABI of a shared object -------------------------------------------------------

# One arg ARG_NAME of type ARG_TYPE and shape [1, ARG_DIM]; one result "index" int32_t[1].
ABI_SOURCE = r"""
#include <stddef.h>
#include <stdint.h>
#ifndef ARG_NAME
#define ARG_NAME "mask"
#endif
#ifndef ARG_TYPE
#define ARG_TYPE 6
#endif
#ifndef ARG_DIM
#define ARG_DIM 33
#endif
static const int64_t arg_shape[] = {1, ARG_DIM}, result_shape[] = {1};
uint32_t mlbridge_aot_abi_version(void) { return 1; }
#ifndef ONLY_VERSION
int32_t mlbridge_aot_num_args(void) { return 1; }
const char *mlbridge_aot_arg_name(int32_t i) { return ARG_NAME; }
int32_t mlbridge_aot_arg_type(int32_t i) { return ARG_TYPE; }
int32_t mlbridge_aot_arg_rank(int32_t i) { return 2; }
const int64_t *mlbridge_aot_arg_shape(int32_t i) { return arg_shape; }
int32_t mlbridge_aot_num_results(void) { return 1; }
const char *mlbridge_aot_result_name(int32_t i) { return "index"; }
int32_t mlbridge_aot_result_type(int32_t i) { return 4; }
int32_t mlbridge_aot_result_rank(int32_t i) { return 1; }
const int64_t *mlbridge_aot_result_shape(int32_t i) { return result_shape; }
#endif
"""


def abi_model(path: Path, *defines: str) -> Path:
    return compile_shared_object(path, ABI_SOURCE, *defines)


def test_an_abi_missing_a_function_names_it(tmp_path: Path) -> None:
    so = abi_model(tmp_path / "partial.so", "ONLY_VERSION")
    with pytest.raises(
        ModelFileError,
        match=at(so) + " exports mlbridge_aot_abi_version but not mlbridge_aot_num_args$",
    ):
        read_tfaot_abi_specs(so)


@pytest.mark.parametrize(
    ("number", "element_type"),
    [(0, ElementType.INT8), (6, ElementType.INT64), (11, ElementType.STRING)],
)
def test_abi_element_types_are_cpp_element_type_numbers(
    tmp_path: Path, number: int, element_type: ElementType
) -> None:
    # mlbridge::ElementType (include/mlbridge/TensorSpec.h): Int8 = 0 ... String = 11.
    so = abi_model(tmp_path / "typed.so", f"ARG_TYPE={number}")
    specs = read_tfaot_abi_specs(so)
    assert specs is not None
    assert specs.features == (TensorSpec("mask", element_type, (1, 33)),)
    assert specs.advice == (TensorSpec("index", ElementType.INT32, (1,)),)


@pytest.mark.parametrize("number", [-1, 12])
def test_an_abi_element_type_out_of_range_is_named(tmp_path: Path, number: int) -> None:
    so = abi_model(tmp_path / "typed.so", f"ARG_TYPE={number}")
    with pytest.raises(
        ModelFileError, match=at(so) + f": arg 0 has unknown element type {number}$"
    ):
        read_tfaot_abi_specs(so)


def test_an_abi_name_that_is_not_utf8_is_read_with_replacement_characters(
    tmp_path: Path,
) -> None:
    so = abi_model(tmp_path / "latin1.so", r'ARG_NAME="gr\xfcn"')
    specs = read_tfaot_abi_specs(so)
    assert specs is not None
    assert specs.features[0].name == "gr\ufffdn"


def test_an_abi_without_a_name_is_refused_as_an_invalid_spec(tmp_path: Path) -> None:
    so = abi_model(tmp_path / "nameless.so", "ARG_NAME=NULL")
    with pytest.raises(ModelFileError, match=at(so) + ": arg 0: tensor spec name must be"):
        read_tfaot_abi_specs(so)


def test_an_abi_with_an_invalid_dimension_names_the_arg(tmp_path: Path) -> None:
    so = abi_model(tmp_path / "negative.so", "ARG_DIM=-7")
    with pytest.raises(ModelFileError, match=at(so) + ": arg 0: .*dimension -7 is invalid"):
        read_tfaot_abi_specs(so)
