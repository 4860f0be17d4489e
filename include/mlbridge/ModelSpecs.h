//===- ModelSpecs.h - Does a model fit the compiler's features? -*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The check every in-process runner (ONNX Runtime, TF AOT) makes when it
/// loads a model, so that a model and a pass that disagree are refused with
/// one message listing every difference, instead of failing on the first.
///
/// The rule is MLGO's versioning rule: the compiler may send more features
/// than the model knows (those are simply not fed), but every model input
/// must be a compiler feature of the same name, element type and shape.
///
/// Shapes are compatible when they have the same rank and each pair of
/// dimensions is equal or one of them is dynamic (-1). Two fully static
/// shapes with the same element count are also compatible (a model exported
/// with a leading batch dimension of 1 reads the same row-major bytes).
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_MODELSPECS_H
#define MLBRIDGE_MODELSPECS_H

#include "mlbridge/TensorSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mlbridge {

/// True if a tensor of shape \p A can be read as one of shape \p B (see the
/// file comment).
bool areShapesCompatible(llvm::ArrayRef<int64_t> A, llvm::ArrayRef<int64_t> B);

/// Every difference between the model's inputs and the compiler's features,
/// one sentence each, in model input order; empty when the model fits.
std::vector<std::string>
listInputDifferences(llvm::ArrayRef<TensorSpec> CompilerFeatures,
                     llvm::ArrayRef<TensorSpec> ModelInputs);

/// For each model input, the index of the compiler feature that feeds it.
/// Fails with an error naming \p ModelName and listing every difference
/// (listInputDifferences()) when the model does not fit.
llvm::Expected<std::vector<size_t>>
bindModelInputs(llvm::ArrayRef<TensorSpec> CompilerFeatures,
                llvm::ArrayRef<TensorSpec> ModelInputs,
                llvm::StringRef ModelName);

/// Checks that \p ModelOutput can answer as \p Advice: the same element type
/// and a compatible shape. The error names \p ModelName and both specs.
llvm::Error checkModelOutput(const TensorSpec &Advice,
                             const TensorSpec &ModelOutput,
                             llvm::StringRef ModelName);

} // namespace mlbridge

#endif // MLBRIDGE_MODELSPECS_H
