//===- Common.cpp - C API: errors, element types, specs -------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "CAPIInternal.h"

#include "mlbridge/TensorSpec.h"

#include <cstring>

using namespace llvm;

namespace mlbridge::capi {

thread_local std::string LastError;

mlbridge_status fail(mlbridge_status Status, const Twine &Msg) {
  LastError = Msg.str();
  return Status;
}

mlbridge_status fail(mlbridge_status Status, Error E) {
  return fail(Status, toString(std::move(E)));
}

bool validType(int T) {
  return T >= 0 && T < static_cast<int>(NumElementTypes);
}

Expected<TensorSpec> toSpec(const mlbridge_tensor_spec *S) {
  if (!S || !S->name || (S->rank && !S->shape) || !validType(S->type))
    return createStringError(inconvertibleErrorCode(),
                             "invalid tensor spec (null name or shape, or "
                             "unknown type)");
  return TensorSpec::create(S->name, static_cast<ElementType>(S->type),
                            ArrayRef<int64_t>(S->shape, S->rank));
}

/// The specs of \p Count C feature specs, or the first one's error.
Expected<std::vector<TensorSpec>> toSpecs(const mlbridge_tensor_spec *Features,
                                          size_t Count) {
  std::vector<TensorSpec> Specs;
  Specs.reserve(Count);
  for (size_t I = 0; I < Count; ++I) {
    Expected<TensorSpec> S = toSpec(&Features[I]);
    if (!S)
      return S.takeError();
    Specs.push_back(std::move(*S));
  }
  return Specs;
}

/// Views of \p Refs as C structs; the string arrays live in \p Ptrs/\p Lens.
std::vector<mlbridge_tensor>
toCViews(ArrayRef<TensorRef> Refs, std::vector<std::string> &Names,
         std::vector<std::vector<const char *>> &Ptrs,
         std::vector<std::vector<size_t>> &Lens) {
  Names.resize(Refs.size());
  Ptrs.resize(Refs.size());
  Lens.resize(Refs.size());
  std::vector<mlbridge_tensor> Views(Refs.size());
  for (size_t I = 0; I < Refs.size(); ++I) {
    const TensorRef &R = Refs[I];
    Names[I] = R.name().str();
    mlbridge_tensor &V = Views[I];
    V.name = Names[I].c_str();
    V.type = static_cast<mlbridge_element_type>(R.type());
    V.shape = R.shape().data();
    V.rank = R.shape().size();
    V.num_elements = R.getElementCount();
    V.data = nullptr;
    V.strings = nullptr;
    V.string_lengths = nullptr;
    if (R.type() == ElementType::String) {
      Ptrs[I].clear();
      Lens[I].clear();
      for (const std::string &S : R.strings()) {
        Ptrs[I].push_back(S.data());
        Lens[I].push_back(S.size());
      }
      V.strings = Ptrs[I].data();
      V.string_lengths = Lens[I].data();
    } else {
      V.data = R.bytes().data();
    }
  }
  return Views;
}

Expected<std::vector<std::string>>
toStrings(const char *const *Strings, const size_t *Lengths, size_t Count) {
  if (Count && (!Strings || !Lengths))
    return createStringError(inconvertibleErrorCode(),
                             "null strings or lengths");
  std::vector<std::string> Out;
  Out.reserve(Count);
  for (size_t I = 0; I < Count; ++I) {
    if (!Strings[I] && Lengths[I])
      return createStringError(inconvertibleErrorCode(), "string %zu is null",
                               I);
    Out.emplace_back(Lengths[I] ? Strings[I] : "", Lengths[I]);
  }
  return Out;
}

} // namespace mlbridge::capi

using namespace mlbridge;
using namespace mlbridge::capi;

extern "C" {

const char *mlbridge_last_error(void) { return LastError.c_str(); }

const char *mlbridge_element_type_name(mlbridge_element_type Type) {
  if (!validType(Type))
    return nullptr;
  return elementTypeName(static_cast<ElementType>(Type)).data();
}

size_t mlbridge_element_size(mlbridge_element_type Type) {
  return validType(Type) ? elementSize(static_cast<ElementType>(Type)) : 0;
}

void mlbridge_free(char *Data) { std::unique_ptr<char[]> Owned(Data); }

} // extern "C"
