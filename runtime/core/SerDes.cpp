//===- SerDes.cpp - Common parts of the SerDes ----------------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/SerDes/SerDes.h"
#include "Common.h"

#include "mlbridge/Registry.h"

using namespace llvm;

namespace mlbridge {

StringRef messageKindName(MessageKind Kind) {
  switch (Kind) {
  case MessageKind::Observation:
    return "observation";
  case MessageKind::Outcome:
    return "outcome";
  case MessageKind::Advice:
    return "advice";
  }
  llvm_unreachable("unknown message kind");
}

std::optional<MessageKind> parseMessageKind(StringRef Name) {
  for (MessageKind K :
       {MessageKind::Observation, MessageKind::Outcome, MessageKind::Advice})
    if (messageKindName(K) == Name)
      return K;
  return std::nullopt;
}

StringRef serDesKindName(SerDesKind Kind) {
  switch (Kind) {
  case SerDesKind::Bitstream:
    return "bitstream";
  case SerDesKind::JSON:
    return "json";
  case SerDesKind::Protobuf:
    return "protobuf";
  }
  llvm_unreachable("unknown SerDes kind");
}

Expected<SerDesKind> parseSerDesKind(StringRef Name) {
  for (SerDesKind K :
       {SerDesKind::Bitstream, SerDesKind::JSON, SerDesKind::Protobuf})
    if (serDesKindName(K) == Name)
      return K;
  return createStringError(inconvertibleErrorCode(),
                           "unknown SerDes '%s' (expected bitstream, json "
                           "or protobuf)",
                           Name.str().c_str());
}

SerDes::~SerDes() = default;

std::string formatShape(ArrayRef<int64_t> Shape) {
  std::string S = "[";
  for (size_t I = 0; I < Shape.size(); ++I)
    S += (I ? "," : "") + std::to_string(Shape[I]);
  return S + "]";
}

Error SerDes::encodeMessagePieces(MessageKind Kind, int64_t Id,
                                  ArrayRef<TensorRef> Tensors,
                                  std::string &Scratch,
                                  std::vector<Piece> &Pieces) {
  size_t Start = Scratch.size();
  if (Error E = encodeMessage(Kind, Id, Tensors, Scratch))
    return E;
  Pieces.push_back({nullptr, Start, Scratch.size() - Start});
  return Error::success();
}

Error SerDes::encode(const Record &R, std::string &Out) {
  if (const auto *H = std::get_if<Header>(&R))
    return encodeHeader(*H, Out);
  if (const auto *C = std::get_if<Context>(&R))
    return encodeContext(C->Name, Out);
  if (const auto *M = std::get_if<Message>(&R)) {
    std::vector<TensorRef> Refs = makeRefs(M->Tensors);
    return encodeMessage(M->Kind, M->Id, Refs, Out);
  }
  return encodeEnd(Out);
}

Expected<uint64_t> checkTensorShape(ArrayRef<int64_t> Shape, ElementType Type,
                                    StringRef What,
                                    const DecoderLimits &Limits) {
  if (Shape.size() > Limits.MaxRank)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' has rank %zu, above the limit of "
                             "%zu (MaxRank)",
                             What.str().c_str(), Shape.size(), Limits.MaxRank);
  for (int64_t Dim : Shape) {
    if (Dim < 0)
      return createStringError(inconvertibleErrorCode(),
                               "tensor '%s' has negative dimension %lld",
                               What.str().c_str(), static_cast<long long>(Dim));
    if (Dim > Limits.MaxDimension)
      return createStringError(
          inconvertibleErrorCode(),
          "tensor '%s' has dimension %lld, above the limit of %lld "
          "(MaxDimension)",
          What.str().c_str(), static_cast<long long>(Dim),
          static_cast<long long>(Limits.MaxDimension));
  }
  // Every encoding spends at least one byte per string element, so the
  // message limit bounds string counts too.
  size_t Size = Type == ElementType::String ? 1 : elementSize(Type);
  std::optional<uint64_t> Count =
      shapeElementCount(Shape, Limits.MaxMessageBytes / Size);
  if (!Count)
    return createStringError(
        inconvertibleErrorCode(),
        "tensor '%s' of shape %s needs more than "
        "%llu bytes (MaxMessageBytes)",
        What.str().c_str(), formatShape(Shape).c_str(),
        static_cast<unsigned long long>(Limits.MaxMessageBytes));
  return *Count;
}

Expected<uint64_t> SerDes::checkShape(ArrayRef<int64_t> Shape, ElementType Type,
                                      StringRef What) const {
  return checkTensorShape(Shape, Type, What, Limits);
}

Expected<std::unique_ptr<SerDes>> createSerDes(SerDesKind Kind,
                                               const DecoderLimits &Limits) {
  switch (Kind) {
  case SerDesKind::Bitstream:
    return createBitstreamSerDes(Limits);
  case SerDesKind::JSON:
    return createJSONSerDes(Limits);
  case SerDesKind::Protobuf:
    // An optional component (MLBridge::Protobuf): registered when loaded,
    // or loaded now by the program's component loader.
    Expected<SerDesFactoryFn> Factory = findSerDes(serDesKindName(Kind));
    if (!Factory)
      return Factory.takeError();
    return (*Factory)(Limits);
  }
  llvm_unreachable("unknown SerDes kind");
}

Expected<std::vector<Record>> decodeAll(SerDes &S, ByteReader &Reader) {
  std::vector<Record> Records;
  while (true) {
    Expected<std::optional<Record>> R = S.decode(Reader);
    if (!R)
      return R.takeError();
    if (!*R)
      return Records;
    bool IsEnd = std::holds_alternative<End>(**R);
    Records.push_back(std::move(**R));
    if (IsEnd)
      return Records;
  }
}

} // namespace mlbridge
