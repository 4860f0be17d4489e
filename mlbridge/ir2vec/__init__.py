"""IR2Vec vocabularies for LLVM 22's in-tree IR2Vec (``mlbridge ir2vec vocab``).

LLVM ships the embedder (``ir2vec::Embedder``, ``llvm-ir2vec``) but, in Debian's
packages, no vocabulary. This package builds one: ``llvm-ir2vec triplets`` turns IR
into (head, tail, relation) triplets over LLVM's fixed entity set (opcodes, types,
operand kinds, comparison predicates), :func:`train_transe` learns entity embeddings
with TransE in numpy, and :func:`write_vocabulary` writes the JSON file that
``IR2VecVocabAnalysis`` and ``-mlbridge-phase-order-ir2vec-vocab`` read
(docs/phase-order.md).
"""

from mlbridge.ir2vec.vocab import (
    IR2VecError,
    TransEConfig,
    TripletSet,
    VocabularyResult,
    build_vocabulary,
    collect_inputs,
    read_entities,
    read_triplets,
    train_transe,
    vocabulary_sections,
    write_vocabulary,
)

__all__ = [
    "IR2VecError",
    "TransEConfig",
    "TripletSet",
    "VocabularyResult",
    "build_vocabulary",
    "collect_inputs",
    "read_entities",
    "read_triplets",
    "train_transe",
    "vocabulary_sections",
    "write_vocabulary",
]
