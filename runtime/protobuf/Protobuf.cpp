//===- Protobuf.cpp - The generic protobuf SerDes -------------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// mlbridge.v1.Record messages, each preceded by its length as a varint.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "ProtoTensors.h"

#include "mlbridge/v1/tensor.pb.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/unknown_field_set.h>

using namespace llvm;

namespace mlbridge {

static constexpr StringLiteral Name = "protobuf";

static v1::ElementType toProto(ElementType T) {
  return static_cast<v1::ElementType>(static_cast<int>(T) + 1);
}

static Expected<ElementType> fromProto(int T, StringRef What) {
  if (T < 1 || T > static_cast<int>(NumElementTypes))
    return decodeError(Name, "tensor '" + What + "' has unknown element type " +
                                 Twine(T));
  return static_cast<ElementType>(T - 1);
}

void specToProto(const TensorSpec &S, v1::TensorSpec &P) {
  P.set_name(S.name());
  P.set_type(toProto(S.type()));
  for (int64_t D : S.shape())
    P.add_shape(D);
  P.set_port(S.port());
  if (const std::optional<ValueRange> &R = S.validRange()) {
    P.mutable_range()->set_low(R->Low);
    P.mutable_range()->set_high(R->High);
  }
  if (!S.maskFeature().empty())
    P.set_mask(S.maskFeature());
}

Expected<TensorSpec> specFromProto(const v1::TensorSpec &P) {
  Expected<ElementType> Type = fromProto(P.type(), P.name());
  if (!Type)
    return Type.takeError();
  std::vector<int64_t> Shape(P.shape().begin(), P.shape().end());
  Expected<TensorSpec> S = TensorSpec::create(P.name(), *Type, Shape, P.port());
  if (!S)
    return decodeError(Name, toString(S.takeError()));
  if (!P.has_range() && !P.has_mask())
    return S;
  // As JSON's "mask", a mask present must name a feature.
  if (P.has_mask() && P.mask().empty())
    return decodeError(Name, "tensor spec '" + P.name() +
                                 "' has an empty mask feature name");
  std::optional<ValueRange> Range;
  if (P.has_range())
    Range = ValueRange{P.range().low(), P.range().high()};
  Expected<TensorSpec> C = S->withConstraints(Range, P.mask());
  if (!C)
    return decodeError(Name, toString(C.takeError()));
  return C;
}

Error checkSpecLimits(const TensorSpec &S, const DecoderLimits &Limits) {
  if (S.rank() > Limits.MaxRank)
    return decodeError(Name, "spec '" + S.name() + "' has rank " +
                                 Twine(S.rank()) +
                                 ", above the limit (MaxRank)");
  for (int64_t D : S.shape())
    if (D > Limits.MaxDimension)
      return decodeError(Name, "spec '" + S.name() + "' has dimension " +
                                   Twine(D) +
                                   ", above the limit (MaxDimension)");
  return Error::success();
}

/// Reads a varint of at most ten bytes at \p I of \p Bytes.
static bool readWireVarint(StringRef Bytes, size_t &I, uint64_t &Value) {
  Value = 0;
  for (unsigned Shift = 0; Shift < 64 && I < Bytes.size(); Shift += 7) {
    auto B = static_cast<unsigned char>(Bytes[I++]);
    Value |= static_cast<uint64_t>(B & 0x7f) << Shift;
    if (!(B & 0x80))
      return true;
  }
  return false;
}

/// Whether every field tag of \p Bytes (a message of type \p D), and of the
/// messages of known fields inside it, fits in 32 bits. Protobuf's C++ parser
/// reads a longer tag as its low 32 bits, a field of another number; the
/// Python decoder (upb) refuses the record, and so must this one.
static bool tagsFit(StringRef Bytes, const google::protobuf::Descriptor *D,
                    unsigned Depth) {
  size_t I = 0;
  while (I < Bytes.size()) {
    uint64_t Tag, Skip;
    if (!readWireVarint(Bytes, I, Tag) || Tag > UINT32_MAX)
      return false;
    switch (Tag & 7) {
    case 0:
      if (!readWireVarint(Bytes, I, Skip))
        return false;
      break;
    case 1:
    case 5: {
      size_t Size = (Tag & 7) == 1 ? 8 : 4;
      if (Bytes.size() - I < Size)
        return false;
      I += Size;
      break;
    }
    case 2: {
      if (!readWireVarint(Bytes, I, Skip) || Skip > Bytes.size() - I)
        return false;
      StringRef Field = Bytes.substr(I, Skip);
      I += Skip;
      const google::protobuf::FieldDescriptor *F =
          D ? D->FindFieldByNumber(static_cast<int>(Tag >> 3)) : nullptr;
      // Depth is bounded by the record's length; the schema nests 3 deep.
      if (F && F->message_type() && Depth < 32 &&
          !tagsFit(Field, F->message_type(), Depth + 1))
        return false;
      break;
    }
    case 3:
    case 4:
      break; // a group's fields follow as tags of their own
    default:
      return false;
    }
  }
  return true;
}

/// Fails if \p M, or a message inside it, holds a field of a known number
/// under the wrong wire type (protobuf keeps such a field as unknown and
/// leaves the known one empty: a tensor's shape would read as []). Fields
/// of unknown numbers pass, as protobuf's compatibility rules want.
static Error checkWireTypes(const google::protobuf::Message &M,
                            uint64_t Offset) {
  namespace pb = google::protobuf;
  const pb::Reflection *R = M.GetReflection();
  const pb::Descriptor *D = M.GetDescriptor();
  const pb::UnknownFieldSet &Unknown = R->GetUnknownFields(M);
  for (int I = 0; I < Unknown.field_count(); ++I)
    if (const pb::FieldDescriptor *F =
            D->FindFieldByNumber(Unknown.field(I).number()))
      return decodeError(Name, "record at byte offset " + Twine(Offset) +
                                   ": field '" + std::string(F->name()) +
                                   "' of " + std::string(D->full_name()) +
                                   " has the wrong wire type");
  std::vector<const pb::FieldDescriptor *> Fields;
  R->ListFields(M, &Fields);
  for (const pb::FieldDescriptor *F : Fields) {
    if (F->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE)
      continue;
    if (F->is_repeated()) {
      for (int I = 0, N = R->FieldSize(M, F); I < N; ++I)
        if (Error E = checkWireTypes(R->GetRepeatedMessage(M, F, I), Offset))
          return E;
    } else if (Error E = checkWireTypes(R->GetMessage(M, F), Offset)) {
      return E;
    }
  }
  return Error::success();
}

namespace {

class ProtobufSerDes final : public SerDes {
public:
  explicit ProtobufSerDes(const DecoderLimits &Limits)
      : SerDes(SerDesKind::Protobuf, Limits) {}

  Error encodeHeader(const Header &H, std::string &Out) override {
    v1::Record R;
    v1::Header *P = R.mutable_header();
    for (const TensorSpec &S : H.Features)
      specToProto(S, *P->add_features());
    if (H.Advice)
      specToProto(*H.Advice, *P->mutable_advice());
    if (H.Score)
      specToProto(*H.Score, *P->mutable_score());
    CurrentHeader = H;
    return append(R, Out);
  }

  Error encodeContext(StringRef Ctx, std::string &Out) override {
    // proto3 `string` fields must hold UTF-8.
    if (!json::isUTF8(Ctx))
      return createStringError(inconvertibleErrorCode(),
                               "protobuf: context name is not valid UTF-8");
    v1::Record R;
    R.set_context(Ctx.str());
    return append(R, Out);
  }

  Error encodeMessage(MessageKind Kind, int64_t Id, ArrayRef<TensorRef> Tensors,
                      std::string &Out) override;

  Error encodeEnd(std::string &Out) override {
    v1::Record R;
    R.set_end(true);
    return append(R, Out);
  }

  Expected<std::optional<Record>> decode(ByteReader &Reader) override;

private:
  static Error append(const v1::Record &R, std::string &Out) {
    std::string Bytes;
    if (!R.SerializeToString(&Bytes))
      return createStringError(inconvertibleErrorCode(),
                               "protobuf: cannot serialize record");
    uint64_t Len = Bytes.size();
    do {
      char B = static_cast<char>(Len & 0x7f);
      Len >>= 7;
      if (Len)
        B = static_cast<char>(B | 0x80);
      Out += B;
    } while (Len);
    Out += Bytes;
    return Error::success();
  }
};

} // namespace

Error messageToProto(MessageKind Kind, int64_t Id, ArrayRef<TensorRef> Tensors,
                     v1::TensorMessage &P) {
  v1::TensorMessage *M = &P;
  M->set_kind(static_cast<v1::MessageKind>(static_cast<int>(Kind)));
  M->set_id(Id);
  for (const TensorRef &T : Tensors) {
    std::optional<uint64_t> Count;
    if (llvm::all_of(T.shape(), [](int64_t D) { return D >= 0; }))
      Count = shapeElementCount(T.shape());
    if (!Count || *Count != T.getElementCount() ||
        (T.type() != ElementType::String &&
         T.bytes().size() != *Count * elementSize(T.type())))
      return createStringError(
          inconvertibleErrorCode(),
          "protobuf: tensor '%s' holds %zu elements, its shape %s needs %llu",
          T.name().str().c_str(), T.getElementCount(),
          formatShape(T.shape()).c_str(),
          static_cast<unsigned long long>(Count.value_or(0)));
    if (!json::isUTF8(T.name()))
      return createStringError(inconvertibleErrorCode(),
                               "protobuf: tensor name is not valid UTF-8");
    v1::Tensor *PT = M->add_tensors();
    PT->set_name(T.name().str());
    PT->set_type(toProto(T.type()));
    for (int64_t D : T.shape())
      PT->add_shape(D);
    if (T.type() == ElementType::String) {
      for (const std::string &S : T.strings())
        PT->add_strings(S);
    } else {
      PT->set_data(T.bytes().data(), T.bytes().size());
    }
  }
  return Error::success();
}

Error ProtobufSerDes::encodeMessage(MessageKind Kind, int64_t Id,
                                    ArrayRef<TensorRef> Tensors,
                                    std::string &Out) {
  v1::Record R;
  if (Error E = messageToProto(Kind, Id, Tensors, *R.mutable_message()))
    return E;
  return append(R, Out);
}

Expected<Message> messageFromProto(const v1::TensorMessage &P,
                                   const DecoderLimits &Limits,
                                   const Twine &Where) {
  Message M;
  switch (P.kind()) {
  case v1::MESSAGE_KIND_OBSERVATION:
    M.Kind = MessageKind::Observation;
    break;
  case v1::MESSAGE_KIND_OUTCOME:
    M.Kind = MessageKind::Outcome;
    break;
  case v1::MESSAGE_KIND_ADVICE:
    M.Kind = MessageKind::Advice;
    break;
  default:
    return decodeError(Name, Where + " has unknown kind " + Twine(P.kind()));
  }
  M.Id = P.id();
  if (static_cast<size_t>(P.tensors_size()) > Limits.MaxTensors)
    return decodeError(Name, Where + " has " + Twine(P.tensors_size()) +
                                 " tensors, above the limit (MaxTensors)");
  M.Tensors.reserve(P.tensors_size());
  for (const v1::Tensor &T : P.tensors()) {
    if (T.name().empty())
      return decodeError(Name, "a tensor of the " + Where + " has no name");
    Expected<ElementType> Type = fromProto(T.type(), T.name());
    if (!Type)
      return Type.takeError();
    std::vector<int64_t> Shape(T.shape().begin(), T.shape().end());
    Expected<uint64_t> Count = checkTensorShape(Shape, *Type, T.name(), Limits);
    if (!Count)
      return decodeError(Name, toString(Count.takeError()));
    if (*Type == ElementType::String) {
      if (!T.data().empty() ||
          static_cast<uint64_t>(T.strings_size()) != *Count)
        return decodeError(Name, "string tensor '" + T.name() + "' has " +
                                     Twine(T.strings_size()) + " strings and " +
                                     Twine(T.data().size()) +
                                     " data bytes, its shape " +
                                     formatShape(Shape) + " needs " +
                                     Twine(*Count) + " strings");
      Expected<TensorValue> V = TensorValue::fromStrings(
          T.name(), Shape,
          std::vector<std::string>(T.strings().begin(), T.strings().end()));
      if (!V)
        return decodeError(Name, toString(V.takeError()));
      M.Tensors.push_back(std::move(*V));
      continue;
    }
    if (T.strings_size() != 0)
      return decodeError(Name, "tensor '" + T.name() + "' of type " +
                                   elementTypeName(*Type) + " has strings");
    Expected<TensorValue> V = TensorValue::fromBytes(
        T.name(), *Type, Shape,
        ArrayRef<char>(T.data().data(), T.data().size()));
    if (!V)
      return decodeError(Name, toString(V.takeError()));
    M.Tensors.push_back(std::move(*V));
  }
  return M;
}

Expected<std::optional<Record>> ProtobufSerDes::decode(ByteReader &Reader) {
  uint64_t Offset = Reader.offset();
  uint64_t Len = 0;
  for (unsigned Shift = 0;; Shift += 7) {
    char B;
    if (Error E = Reader.readExact(MutableArrayRef<char>(B))) {
      if (Shift == 0 && isEndOfStream(E)) {
        consumeError(std::move(E));
        return std::nullopt;
      }
      return decodeError(
          Name, toString(inRecord(std::move(E),
                                  "the length of the record at byte offset " +
                                      Twine(Offset))));
    }
    // The tenth byte holds bit 63 only: 0 or 1, with no continuation.
    if (Shift == 63 && (static_cast<unsigned char>(B) & 0xfe))
      return decodeError(Name, "record length at byte offset " + Twine(Offset) +
                                   " overflows 64 bits");
    Len |= static_cast<uint64_t>(B & 0x7f) << Shift;
    if (!(B & 0x80))
      break;
  }
  if (Len > limits().MaxMessageBytes)
    return decodeError(
        Name, "record at byte offset " + Twine(Offset) + " has length " +
                  Twine(Len) + ", above the limit of " +
                  Twine(limits().MaxMessageBytes) + " bytes (MaxMessageBytes)");
  std::string Bytes;
  if (Error E = readGrowing(Reader, Bytes, Len))
    return decodeError(
        Name, toString(inRecord(std::move(E), "the record of " + Twine(Len) +
                                                  " bytes at byte offset " +
                                                  Twine(Offset))));
  v1::Record R;
  bool Parsed;
  {
    // This decoder reports the failure itself; protobuf would also log it.
    google::protobuf::LogSilencer Quiet;
    Parsed =
        tagsFit(Bytes, v1::Record::descriptor(), 0) && R.ParseFromString(Bytes);
  }
  if (!Parsed)
    return decodeError(
        Name, "record at byte offset " + Twine(Offset) +
                  " is not a valid mlbridge.v1.Record (malformed, or a "
                  "string field that is not UTF-8)");
  if (Error E = checkWireTypes(R, Offset))
    return E;
  switch (R.record_case()) {
  case v1::Record::kHeader: {
    Header H;
    const v1::Header &P = R.header();
    if (static_cast<size_t>(P.features_size()) > limits().MaxTensors)
      return decodeError(Name, "header at byte offset " + Twine(Offset) +
                                   " has " + Twine(P.features_size()) +
                                   " features, above the limit (MaxTensors)");
    // Every spec is read before any limit is checked, as in the Python
    // decoder: a header with several faults gets the same error class.
    for (const v1::TensorSpec &S : P.features()) {
      Expected<TensorSpec> Spec = specFromProto(S);
      if (!Spec)
        return Spec.takeError();
      H.Features.push_back(std::move(*Spec));
    }
    if (P.has_advice()) {
      Expected<TensorSpec> Spec = specFromProto(P.advice());
      if (!Spec)
        return Spec.takeError();
      H.Advice = std::move(*Spec);
    }
    if (P.has_score()) {
      Expected<TensorSpec> Spec = specFromProto(P.score());
      if (!Spec)
        return Spec.takeError();
      H.Score = std::move(*Spec);
    }
    for (const TensorSpec &S : H.Features)
      if (Error E = checkSpecLimits(S, limits()))
        return E;
    for (const std::optional<TensorSpec> *S : {&H.Advice, &H.Score})
      if (*S)
        if (Error E = checkSpecLimits(**S, limits()))
          return E;
    CurrentHeader = H;
    return Record(std::move(H));
  }
  case v1::Record::kContext:
    return Record(Context{R.context()});
  case v1::Record::kMessage: {
    Expected<Message> M = messageFromProto(
        R.message(), limits(), "message at byte offset " + Twine(Offset));
    if (!M)
      return M.takeError();
    return Record(std::move(*M));
  }
  case v1::Record::kEnd:
    if (!R.end())
      return decodeError(Name, "end record at byte offset " + Twine(Offset) +
                                   " is false");
    return Record(End{});
  case v1::Record::RECORD_NOT_SET:
    break;
  }
  return decodeError(Name,
                     "record at byte offset " + Twine(Offset) + " is empty");
}

std::unique_ptr<SerDes> createProtobufSerDes(const DecoderLimits &Limits) {
  return std::make_unique<ProtobufSerDes>(Limits);
}

} // namespace mlbridge
