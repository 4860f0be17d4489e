//===- SerDes.cpp - C API: encoding and decoding messages -----------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "CAPIInternal.h"

#include "mlbridge/SerDes/ByteReader.h"

#include <cstring>

using namespace llvm;
using namespace mlbridge;
using namespace mlbridge::capi;

extern "C" {

mlbridge_status mlbridge_serdes_create(const char *Kind,
                                       mlbridge_serdes **Out) {
  if (!Kind || !Out)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  *Out = nullptr;
  Expected<SerDesKind> K = parseSerDesKind(Kind);
  if (!K)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, K.takeError());
  Expected<std::unique_ptr<SerDes>> S = createSerDes(*K);
  if (!S)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, S.takeError());
  auto Handle = std::make_unique<mlbridge_serdes>();
  Handle->Impl = std::move(*S);
  *Out = Handle.release();
  return MLBRIDGE_OK;
}

void mlbridge_serdes_destroy(mlbridge_serdes *S) {
  std::unique_ptr<mlbridge_serdes> Owned(S);
}

/// Copies \p Bytes into a buffer that mlbridge_free() releases.
static mlbridge_status giveBuffer(const std::string &Bytes, char **OutData,
                                  size_t *OutSize) {
  auto Buf = std::make_unique<char[]>(Bytes.size() + 1);
  std::memcpy(Buf.get(), Bytes.data(), Bytes.size());
  *OutSize = Bytes.size();
  *OutData = Buf.release();
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_serdes_encode_header(
    mlbridge_serdes *S, const mlbridge_tensor_spec *Features,
    size_t NumFeatures, const mlbridge_tensor_spec *Advice,
    const mlbridge_tensor_spec *Score, char **OutData, size_t *OutSize) {
  if (!S || !OutData || !OutSize || (NumFeatures && !Features))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  Header H;
  for (size_t I = 0; I < NumFeatures; ++I) {
    Expected<TensorSpec> Spec = toSpec(&Features[I]);
    if (!Spec)
      return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Spec.takeError());
    H.Features.push_back(std::move(*Spec));
  }
  for (auto [In, Slot] :
       {std::pair(Advice, &H.Advice), std::pair(Score, &H.Score)}) {
    if (!In)
      continue;
    Expected<TensorSpec> Spec = toSpec(In);
    if (!Spec)
      return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Spec.takeError());
    *Slot = std::move(*Spec);
  }
  std::string Out;
  if (Error E = S->Impl->encodeHeader(H, Out))
    return fail(MLBRIDGE_ERROR_SERDES, std::move(E));
  return giveBuffer(Out, OutData, OutSize);
}

mlbridge_status mlbridge_serdes_encode_context(mlbridge_serdes *S,
                                               const char *Context,
                                               char **OutData,
                                               size_t *OutSize) {
  if (!S || !Context || !OutData || !OutSize)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  std::string Out;
  if (Error E = S->Impl->encodeContext(Context, Out))
    return fail(MLBRIDGE_ERROR_SERDES, std::move(E));
  return giveBuffer(Out, OutData, OutSize);
}

mlbridge_status
mlbridge_serdes_encode_message(mlbridge_serdes *S, mlbridge_message_kind Kind,
                               int64_t Id, const mlbridge_tensor *Tensors,
                               size_t NumTensors, char **OutData,
                               size_t *OutSize) {
  if (!S || !OutData || !OutSize || (NumTensors && !Tensors))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  if (Kind < MLBRIDGE_OBSERVATION || Kind > MLBRIDGE_ADVICE)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "unknown message kind " + Twine(static_cast<int>(Kind)));
  // Strings must be copied to std::string for TensorRef; numeric data is
  // viewed in place.
  std::vector<std::vector<std::string>> StringStore(NumTensors);
  std::vector<TensorRef> Refs;
  Refs.reserve(NumTensors);
  for (size_t I = 0; I < NumTensors; ++I) {
    const mlbridge_tensor &T = Tensors[I];
    if (!T.name || (T.rank && !T.shape) || !validType(T.type))
      return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                  "tensor " + Twine(I) +
                      " has a null name or shape, or an "
                      "unknown type");
    ArrayRef<int64_t> Shape(T.shape, T.rank);
    if (T.type == MLBRIDGE_STRING) {
      Expected<std::vector<std::string>> Strs =
          toStrings(T.strings, T.string_lengths, T.num_elements);
      if (!Strs)
        return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Strs.takeError());
      StringStore[I] = std::move(*Strs);
      Refs.emplace_back(T.name, Shape, StringStore[I]);
      continue;
    }
    if (T.num_elements && !T.data)
      return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                  "tensor '" + Twine(T.name) + "' has null data");
    size_t Size = elementSize(static_cast<ElementType>(T.type));
    Refs.emplace_back(T.name, static_cast<ElementType>(T.type), Shape,
                      ArrayRef<char>(static_cast<const char *>(T.data),
                                     T.num_elements * Size));
  }
  std::string Out;
  if (Error E =
          S->Impl->encodeMessage(static_cast<MessageKind>(Kind), Id, Refs, Out))
    return fail(MLBRIDGE_ERROR_SERDES, std::move(E));
  return giveBuffer(Out, OutData, OutSize);
}

mlbridge_status mlbridge_serdes_encode_end(mlbridge_serdes *S, char **OutData,
                                           size_t *OutSize) {
  if (!S || !OutData || !OutSize)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  std::string Out;
  if (Error E = S->Impl->encodeEnd(Out))
    return fail(MLBRIDGE_ERROR_SERDES, std::move(E));
  return giveBuffer(Out, OutData, OutSize);
}

mlbridge_status mlbridge_serdes_decode_message(mlbridge_serdes *S,
                                               const char *Data, size_t Size,
                                               size_t *Consumed,
                                               mlbridge_message **Out) {
  if (!S || !Consumed || !Out || (Size && !Data))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  *Out = nullptr;
  *Consumed = 0;
  MemoryByteReader Reader(StringRef(Data, Size));
  while (true) {
    Expected<std::optional<Record>> R = S->Impl->decode(Reader);
    if (!R)
      return fail(MLBRIDGE_ERROR_SERDES, R.takeError());
    *Consumed = Reader.offset();
    if (!*R || std::holds_alternative<End>(**R))
      return fail(MLBRIDGE_END_OF_STREAM, "end of stream");
    if (auto *M = std::get_if<Message>(&**R)) {
      auto Handle = std::make_unique<mlbridge_message>();
      Handle->Msg = std::move(*M);
      for (const TensorValue &T : Handle->Msg.Tensors) {
        Handle->StringPtrs.emplace_back();
        Handle->StringLens.emplace_back();
        for (const std::string &Str : T.strings()) {
          Handle->StringPtrs.back().push_back(Str.data());
          Handle->StringLens.back().push_back(Str.size());
        }
      }
      *Out = Handle.release();
      return MLBRIDGE_OK;
    }
  }
}

void mlbridge_message_destroy(mlbridge_message *M) {
  std::unique_ptr<mlbridge_message> Owned(M);
}

mlbridge_message_kind mlbridge_message_get_kind(const mlbridge_message *M) {
  return static_cast<mlbridge_message_kind>(M->Msg.Kind);
}

int64_t mlbridge_message_get_id(const mlbridge_message *M) { return M->Msg.Id; }

size_t mlbridge_message_num_tensors(const mlbridge_message *M) {
  return M->Msg.Tensors.size();
}

mlbridge_status mlbridge_message_get_tensor(const mlbridge_message *M,
                                            size_t Index,
                                            mlbridge_tensor *Out) {
  if (!M || !Out)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  if (Index >= M->Msg.Tensors.size())
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "tensor index " + Twine(Index) + " out of range (" +
                    Twine(M->Msg.Tensors.size()) + " tensors)");
  const TensorValue &T = M->Msg.Tensors[Index];
  Out->name = T.name().c_str();
  Out->type = static_cast<mlbridge_element_type>(T.type());
  Out->shape = T.shape().data();
  Out->rank = T.shape().size();
  Out->num_elements = T.getElementCount();
  bool IsString = T.type() == ElementType::String;
  Out->data = IsString ? nullptr : T.bytes().data();
  Out->strings = IsString ? M->StringPtrs[Index].data() : nullptr;
  Out->string_lengths = IsString ? M->StringLens[Index].data() : nullptr;
  return MLBRIDGE_OK;
}

} // extern "C"
