"""Test-only helpers, kept out of the ``mlbridge`` wheel.

Importable from the tests as ``support.<module>`` (pytest puts ``test/python`` on
``sys.path``); scripts outside ``test/python`` add that folder first.

- :mod:`support.vectors`: the exact JSON form of records in ``test/vectors/cases.json``;
- :mod:`support.mlir_kernels`: generated MLIR ``(index) -> i64`` kernels and their results;
- :mod:`support.mlir_lowering`: lower such kernels with the LLVM 22 tools and run them;
- :mod:`support.aot_testmodels`: the SavedModels the TF AOT tests compile (run by the
  build, ``test/unit/CMakeLists.txt``, and by ``test_aot.py``).
"""
