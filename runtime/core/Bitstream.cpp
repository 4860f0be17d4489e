//===- Bitstream.cpp - LLVM's training-log layout, extended ---------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// JSON lines for header, context and message headers; raw little-endian
// values after a message line. Byte-compatible with LLVM's TrainingLogger and
// InteractiveModelRunner for static specs.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/SerDes/Bitstream.h"
#include "Common.h"

#include "llvm/Support/Endian.h"

using namespace llvm;

namespace mlbridge {

static constexpr StringLiteral Name = "bitstream";

Error encodeRawTensor(const TensorRef &T, std::string &Out) {
  if (T.type() != ElementType::String) {
    Out.append(T.bytes().data(), T.bytes().size());
    return Error::success();
  }
  for (const std::string &S : T.strings()) {
    if (S.size() > UINT32_MAX)
      return createStringError(inconvertibleErrorCode(),
                               "tensor '%s': a string element of %zu bytes "
                               "does not fit a uint32 length",
                               T.name().str().c_str(), S.size());
    char Len[4];
    support::endian::write32le(Len, static_cast<uint32_t>(S.size()));
    Out.append(Len, 4);
    Out += S;
  }
  return Error::success();
}

/// Reads one tensor's values; \p Budget is what remains of the message limit
/// and is checked before anything is allocated.
static Expected<TensorValue> readValues(StringRef TensorName, ElementType Type,
                                        ArrayRef<int64_t> Shape, uint64_t Count,
                                        ByteReader &Reader, uint64_t &Budget) {
  uint64_t Start = Reader.offset();
  auto What = [&] {
    return ("tensor '" + TensorName + "' starting at byte offset " +
            Twine(Start))
        .str();
  };
  if (Type != ElementType::String) {
    uint64_t Bytes = Count * elementSize(Type);
    if (Bytes > Budget)
      return createStringError(inconvertibleErrorCode(),
                               "tensor '%s' needs %llu bytes, above the "
                               "message limit (MaxMessageBytes)",
                               TensorName.str().c_str(),
                               static_cast<unsigned long long>(Bytes));
    Budget -= Bytes;
    // A large claim is read as the bytes arrive, and only then copied into
    // its tensor: the claim alone allocates nothing.
    constexpr uint64_t DirectRead = uint64_t(1) << 20;
    std::string Arrived;
    if (Bytes > DirectRead)
      if (Error E = readGrowing(Reader, Arrived, Bytes))
        return inRecord(std::move(E), What());
    Expected<TensorValue> V =
        Bytes > DirectRead ? TensorValue::fromBytes(
                                 TensorName, Type, Shape,
                                 ArrayRef<char>(Arrived.data(), Arrived.size()))
                           : TensorValue::create(TensorName, Type, Shape);
    if (!V)
      return V.takeError();
    if (Bytes <= DirectRead)
      if (Error E = Reader.readExact(V->mutableBytes()))
        return inRecord(std::move(E), What());
    if (Type == ElementType::Bool) {
      ArrayRef<char> B = V->bytes();
      for (size_t I = 0; I < B.size(); ++I)
        if (B[I] != 0 && B[I] != 1)
          return createStringError(
              inconvertibleErrorCode(),
              "bool element %zu of tensor '%s' at byte offset %llu is %u "
              "(must be 0 or 1)",
              I, TensorName.str().c_str(),
              static_cast<unsigned long long>(Start + I),
              static_cast<unsigned char>(B[I]));
    }
    return V;
  }
  // At least 4 length bytes per string, checked before sizing the vector.
  if (Count > Budget / 4)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' has %llu strings, above the "
                             "message limit (MaxMessageBytes)",
                             TensorName.str().c_str(),
                             static_cast<unsigned long long>(Count));
  // Grown as strings arrive: a claimed count alone allocates little.
  std::vector<std::string> Strings;
  Strings.reserve(std::min<uint64_t>(Count, 4096));
  for (uint64_t I = 0; I < Count; ++I) {
    char LenBytes[4];
    if (Error E = Reader.readExact(LenBytes))
      return inRecord(std::move(E), What());
    uint64_t Len = support::endian::read32le(LenBytes);
    if (Len + 4 > Budget)
      return createStringError(
          inconvertibleErrorCode(),
          "string element %llu of tensor '%s' at byte offset %llu has "
          "length %llu, above the message limit (MaxMessageBytes)",
          static_cast<unsigned long long>(I), TensorName.str().c_str(),
          static_cast<unsigned long long>(Reader.offset() - 4),
          static_cast<unsigned long long>(Len));
    Budget -= Len + 4;
    if (Error E = readGrowing(Reader, Strings.emplace_back(), Len))
      return inRecord(std::move(E), What());
  }
  return TensorValue::fromStrings(TensorName, Shape, std::move(Strings));
}

Expected<TensorValue> decodeRawTensor(const TensorSpec &Spec,
                                      ArrayRef<int64_t> Shape,
                                      ByteReader &Reader,
                                      const DecoderLimits &Limits) {
  if (!Spec.matchesConcreteShape(Shape))
    return createStringError(inconvertibleErrorCode(),
                             "shape %s does not match spec '%s' %s",
                             formatShape(Shape).c_str(), Spec.name().c_str(),
                             formatShape(Spec.shape()).c_str());
  if (Shape.size() > Limits.MaxRank)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' has rank %zu, above the limit of "
                             "%zu (MaxRank)",
                             Spec.name().c_str(), Shape.size(), Limits.MaxRank);
  size_t Size =
      Spec.type() == ElementType::String ? 4 : elementSize(Spec.type());
  std::optional<uint64_t> Count =
      shapeElementCount(Shape, Limits.MaxMessageBytes / Size);
  if (!Count)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' of shape %s is above the message "
                             "limit (MaxMessageBytes)",
                             Spec.name().c_str(), formatShape(Shape).c_str());
  uint64_t Budget = Limits.MaxMessageBytes;
  return readValues(Spec.name(), Spec.type(), Shape, *Count, Reader, Budget);
}

Expected<TensorValue> decodeRawTensor(const TensorSpec &Spec, StringRef Bytes,
                                      const DecoderLimits &Limits) {
  if (Spec.isDynamic())
    return createStringError(inconvertibleErrorCode(),
                             "raw tensor '%s' needs a static spec",
                             Spec.name().c_str());
  MemoryByteReader Reader(Bytes);
  Expected<TensorValue> V = decodeRawTensor(Spec, Spec.shape(), Reader, Limits);
  if (!V)
    return V.takeError();
  if (!Reader.atEnd())
    return createStringError(inconvertibleErrorCode(),
                             "raw tensor '%s': %zu bytes after the value",
                             Spec.name().c_str(), Reader.remaining().size());
  return V;
}

namespace {

class BitstreamSerDes final : public LineSerDes {
public:
  explicit BitstreamSerDes(const DecoderLimits &Limits)
      : LineSerDes(SerDesKind::Bitstream, Limits) {}

  Error encodeMessage(MessageKind Kind, int64_t Id, ArrayRef<TensorRef> Tensors,
                      std::string &Out) override;
  /// The message line and the trailing newline in the scratch string, the
  /// numeric values referenced in place.
  Error encodeMessagePieces(MessageKind Kind, int64_t Id,
                            ArrayRef<TensorRef> Tensors, std::string &Scratch,
                            std::vector<Piece> &Pieces) override;

  Expected<std::optional<Record>> decode(ByteReader &Reader) override;

private:
  /// Checks \p Tensors against the header and appends the message line.
  Error encodeMessageLine(MessageKind Kind, int64_t Id,
                          ArrayRef<TensorRef> Tensors, std::string &Out);
  /// The specs of messages of \p Kind in the current header.
  Expected<std::vector<const TensorSpec *>> specsFor(MessageKind Kind) const;
  /// The concrete shape of each of \p Specs, from \p Shapes (the line's
  /// `shapes`) for the dynamic ones; every shape error comes before any value
  /// is read.
  Error resolveShapes(ArrayRef<const TensorSpec *> Specs,
                      const json::Object *Shapes, uint64_t Offset,
                      std::vector<std::vector<int64_t>> &Out) const;
  Expected<Message> decodeMessage(MessageKind Kind, int64_t Id,
                                  const json::Object &Line, uint64_t Offset,
                                  ByteReader &Reader);
};

} // namespace

Expected<std::vector<const TensorSpec *>>
BitstreamSerDes::specsFor(MessageKind Kind) const {
  if (!CurrentHeader)
    return createStringError(inconvertibleErrorCode(),
                             "bitstream: %s message before any header",
                             messageKindName(Kind).data());
  std::vector<const TensorSpec *> Specs;
  switch (Kind) {
  case MessageKind::Observation:
    for (const TensorSpec &S : CurrentHeader->Features)
      Specs.push_back(&S);
    break;
  case MessageKind::Outcome:
    if (!CurrentHeader->Score)
      return createStringError(inconvertibleErrorCode(),
                               "bitstream: outcome message but the header "
                               "has no score spec");
    Specs.push_back(&*CurrentHeader->Score);
    break;
  case MessageKind::Advice:
    if (!CurrentHeader->Advice)
      return createStringError(inconvertibleErrorCode(),
                               "bitstream: advice message but the header has "
                               "no advice spec");
    Specs.push_back(&*CurrentHeader->Advice);
    break;
  }
  return Specs;
}

Error BitstreamSerDes::encodeMessage(MessageKind Kind, int64_t Id,
                                     ArrayRef<TensorRef> Tensors,
                                     std::string &Out) {
  size_t OldSize = Out.size();
  if (Error E = encodeMessageLine(Kind, Id, Tensors, Out))
    return E;
  for (const TensorRef &T : Tensors) {
    if (Error E = encodeRawTensor(T, Out)) {
      Out.resize(OldSize);
      return E;
    }
  }
  Out += '\n';
  return Error::success();
}

Error BitstreamSerDes::encodeMessagePieces(MessageKind Kind, int64_t Id,
                                           ArrayRef<TensorRef> Tensors,
                                           std::string &Scratch,
                                           std::vector<Piece> &Pieces) {
  size_t OldSize = Scratch.size(), OldPieces = Pieces.size();
  if (Error E = encodeMessageLine(Kind, Id, Tensors, Scratch))
    return E;
  size_t Start = OldSize; // of the piece being gathered in Scratch
  auto Flush = [&] {
    if (Scratch.size() > Start)
      Pieces.push_back({nullptr, Start, Scratch.size() - Start});
    Start = Scratch.size();
  };
  for (const TensorRef &T : Tensors) {
    if (T.type() != ElementType::String) {
      Flush();
      if (!T.bytes().empty())
        Pieces.push_back({T.bytes().data(), 0, T.bytes().size()});
      continue;
    }
    if (Error E = encodeRawTensor(T, Scratch)) {
      Scratch.resize(OldSize);
      Pieces.resize(OldPieces);
      return E;
    }
  }
  Scratch += '\n';
  Flush();
  return Error::success();
}

Error BitstreamSerDes::encodeMessageLine(MessageKind Kind, int64_t Id,
                                         ArrayRef<TensorRef> Tensors,
                                         std::string &Out) {
  Expected<std::vector<const TensorSpec *>> Specs = specsFor(Kind);
  if (!Specs)
    return Specs.takeError();
  if (Specs->size() != Tensors.size())
    return createStringError(inconvertibleErrorCode(),
                             "bitstream: %s message has %zu tensors, the "
                             "header lists %zu",
                             messageKindName(Kind).data(), Tensors.size(),
                             Specs->size());
  bool AnyDynamic = false;
  for (size_t I = 0; I < Tensors.size(); ++I) {
    const TensorSpec &Spec = *(*Specs)[I];
    const TensorRef &T = Tensors[I];
    if (T.name() != Spec.name())
      return createStringError(inconvertibleErrorCode(),
                               "bitstream: tensor %zu is '%s', the header "
                               "expects '%s'",
                               I, T.name().str().c_str(), Spec.name().c_str());
    if (T.type() != Spec.type())
      return createStringError(inconvertibleErrorCode(),
                               "bitstream: tensor '%s' is %s, the header says "
                               "%s",
                               Spec.name().c_str(),
                               elementTypeName(T.type()).data(),
                               elementTypeName(Spec.type()).data());
    if (!Spec.matchesConcreteShape(T.shape()))
      return createStringError(inconvertibleErrorCode(),
                               "bitstream: tensor '%s' has shape %s, the "
                               "header says %s",
                               Spec.name().c_str(),
                               formatShape(T.shape()).c_str(),
                               formatShape(Spec.shape()).c_str());
    std::optional<uint64_t> Count = shapeElementCount(T.shape());
    if (!Count || *Count != T.getElementCount() ||
        (T.type() != ElementType::String &&
         T.bytes().size() != *Count * elementSize(T.type())))
      return createStringError(
          inconvertibleErrorCode(),
          "bitstream: tensor '%s' holds %zu elements, "
          "its shape %s needs %llu",
          Spec.name().c_str(), T.getElementCount(),
          formatShape(T.shape()).c_str(),
          static_cast<unsigned long long>(Count.value_or(0)));
    AnyDynamic |= Spec.isDynamic();
  }
  Out += "{\"";
  Out += messageKindName(Kind);
  Out += "\":";
  Out += std::to_string(Id);
  if (AnyDynamic) {
    Out += ",\"shapes\":{";
    bool First = true;
    for (size_t I = 0; I < Tensors.size(); ++I) {
      if (!(*Specs)[I]->isDynamic())
        continue;
      if (!First)
        Out += ',';
      First = false;
      writeJSONString(Tensors[I].name(), Out);
      Out += ':';
      writeShapeJSON(Tensors[I].shape(), Out);
    }
    Out += '}';
  }
  Out += "}\n";
  return Error::success();
}

Error BitstreamSerDes::resolveShapes(
    ArrayRef<const TensorSpec *> Specs, const json::Object *Shapes,
    uint64_t Offset, std::vector<std::vector<int64_t>> &Out) const {
  std::string Where = "message at byte offset " + std::to_string(Offset);
  if (Shapes) {
    for (const auto &KV : *Shapes) {
      StringRef Key = KV.first;
      const TensorSpec *const *S = llvm::find_if(
          Specs, [&](const TensorSpec *T) { return T->name() == Key; });
      if (S == Specs.end())
        return decodeError(Name, "'shapes' of the " + Where + " names '" + Key +
                                     "', which the header does not list");
      if (!(*S)->isDynamic())
        return decodeError(Name, "'shapes' of the " + Where +
                                     " gives a shape for '" + Key +
                                     "', whose spec is static");
    }
  }
  Out.clear();
  for (const TensorSpec *Spec : Specs) {
    std::vector<int64_t> Shape(Spec->shape().begin(), Spec->shape().end());
    if (Spec->isDynamic()) {
      const json::Value *Given = Shapes ? Shapes->get(Spec->name()) : nullptr;
      if (!Given)
        return decodeError(Name, Where +
                                     " gives no shape for dynamic tensor '" +
                                     Spec->name() + "'");
      const json::Array *A = Given->getAsArray();
      if (!A)
        return decodeError(Name, "shape of tensor '" + Spec->name() +
                                     "' is not an array");
      Shape.clear();
      for (const json::Value &D : *A) {
        std::optional<int64_t> N = D.getAsInteger();
        if (!N)
          return decodeError(Name, "shape of tensor '" + Spec->name() +
                                       "' has a non-integer dimension");
        Shape.push_back(*N);
      }
      if (!Spec->matchesConcreteShape(Shape))
        return decodeError(Name, "shape " + formatShape(Shape) +
                                     " of tensor '" + Spec->name() +
                                     "' contradicts the header's " +
                                     formatShape(Spec->shape()));
    }
    Out.push_back(std::move(Shape));
  }
  return Error::success();
}

Expected<Message> BitstreamSerDes::decodeMessage(MessageKind Kind, int64_t Id,
                                                 const json::Object &Line,
                                                 uint64_t Offset,
                                                 ByteReader &Reader) {
  Expected<std::vector<const TensorSpec *>> Specs = specsFor(Kind);
  if (!Specs)
    return Specs.takeError();
  const json::Object *Shapes = Line.getObject("shapes");
  if (Line.get("shapes") && !Shapes)
    return decodeError(Name, "'shapes' of the message at byte offset " +
                                 Twine(Offset) + " is not an object");
  // First every shape, then the values: a line that is wrong anywhere is
  // malformed before any value is read, as in the Python decoder.
  std::vector<std::vector<int64_t>> TensorShapes;
  if (Error E = resolveShapes(*Specs, Shapes, Offset, TensorShapes))
    return E;
  Message M;
  M.Kind = Kind;
  M.Id = Id;
  M.Tensors.reserve(Specs->size());
  uint64_t Budget = limits().MaxMessageBytes;
  for (size_t I = 0; I < Specs->size(); ++I) {
    const TensorSpec &Spec = *(*Specs)[I];
    const std::vector<int64_t> &Shape = TensorShapes[I];
    Expected<uint64_t> Count = checkShape(Shape, Spec.type(), Spec.name());
    if (!Count)
      return decodeError(Name, toString(Count.takeError()));
    Expected<TensorValue> V =
        readValues(Spec.name(), Spec.type(), Shape, *Count, Reader, Budget);
    if (!V)
      return decodeError(Name, toString(V.takeError()));
    M.Tensors.push_back(std::move(*V));
  }
  char NL;
  uint64_t NLOffset = Reader.offset();
  if (Error E = Reader.readExact(MutableArrayRef<char>(NL)))
    return decodeError(
        Name, toString(inRecord(std::move(E), "the final '\\n' of the "
                                              "message at byte offset " +
                                                  Twine(Offset))));
  if (NL != '\n')
    return decodeError(Name, "message at byte offset " + Twine(Offset) +
                                 " lacks its final '\\n' (byte offset " +
                                 Twine(NLOffset) + ")");
  return M;
}

Expected<std::optional<Record>> BitstreamSerDes::decode(ByteReader &Reader) {
  std::string Line;
  uint64_t Offset = 0;
  Expected<std::optional<LineRecord>> L =
      readLineRecord(Reader, limits(), Name, CurrentHeader, Line, Offset);
  if (!L)
    return L.takeError();
  if (!*L)
    return std::nullopt;
  if (Record *R = std::get_if<Record>(&**L))
    return std::move(*R);
  const MessageLine &ML = std::get<MessageLine>(**L);
  if (Error E = checkMessageKeys(ML, "shapes", Name, Offset))
    return E;
  Expected<Message> M =
      decodeMessage(ML.Kind, ML.Id, ML.Object, Offset, Reader);
  if (!M)
    return M.takeError();
  return Record(std::move(*M));
}

std::unique_ptr<SerDes> createBitstreamSerDes(const DecoderLimits &Limits) {
  return std::make_unique<BitstreamSerDes>(Limits);
}

} // namespace mlbridge
