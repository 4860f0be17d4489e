//===- Common.cpp - Helpers shared by the SerDes implementations ----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

using namespace llvm;

namespace mlbridge {

Error decodeError(StringRef SerDesName, const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), SerDesName + ": " + Msg);
}

void writeHeaderLine(const Header &H, std::string &Out) {
  Out += "{\"features\":[";
  for (size_t I = 0; I < H.Features.size(); ++I) {
    if (I)
      Out += ',';
    H.Features[I].writeJSON(Out);
  }
  Out += ']';
  // LLVM writes the score before the advice.
  if (H.Score) {
    Out += ",\"score\":";
    H.Score->writeJSON(Out);
  }
  if (H.Advice) {
    Out += ",\"advice\":";
    H.Advice->writeJSON(Out);
  }
  Out += "}\n";
}

Error writeContextLine(StringRef Name, std::string &Out) {
  if (!json::isUTF8(Name))
    return createStringError(inconvertibleErrorCode(),
                             "context name is not valid UTF-8");
  Out += "{\"context\":";
  writeJSONString(Name, Out);
  Out += "}\n";
  return Error::success();
}

static Error checkSpecLimits(const TensorSpec &Spec,
                             const DecoderLimits &Limits) {
  if (Spec.rank() > Limits.MaxRank)
    return createStringError(inconvertibleErrorCode(),
                             "spec '%s' has rank %zu, above the limit of %zu "
                             "(MaxRank)",
                             Spec.name().c_str(), Spec.rank(), Limits.MaxRank);
  for (int64_t Dim : Spec.shape())
    if (Dim > Limits.MaxDimension)
      return createStringError(inconvertibleErrorCode(),
                               "spec '%s' has dimension %lld, above the limit "
                               "of %lld (MaxDimension)",
                               Spec.name().c_str(), static_cast<long long>(Dim),
                               static_cast<long long>(Limits.MaxDimension));
  return Error::success();
}

Expected<Header> parseHeader(const json::Object &O,
                             const DecoderLimits &Limits) {
  Header H;
  const json::Array *Features = O.getArray("features");
  if (!Features)
    return createStringError(inconvertibleErrorCode(),
                             "header has no 'features' array");
  if (Features->size() > Limits.MaxTensors)
    return createStringError(inconvertibleErrorCode(),
                             "header has %zu features, above the limit of "
                             "%zu (MaxTensors)",
                             Features->size(), Limits.MaxTensors);
  H.Features.reserve(Features->size());
  for (const json::Value &V : *Features) {
    Expected<TensorSpec> Spec = TensorSpec::fromJSON(V);
    if (!Spec)
      return Spec.takeError();
    if (Error E = checkSpecLimits(*Spec, Limits))
      return E;
    H.Features.push_back(std::move(*Spec));
  }
  for (auto [Key, Slot] : {std::pair(StringRef("advice"), &H.Advice),
                           std::pair(StringRef("score"), &H.Score)}) {
    const json::Value *V = O.get(Key);
    if (!V || V->kind() == json::Value::Null)
      continue;
    Expected<TensorSpec> Spec = TensorSpec::fromJSON(*V);
    if (!Spec)
      return Spec.takeError();
    if (Error E = checkSpecLimits(*Spec, Limits))
      return E;
    *Slot = std::move(*Spec);
  }
  return H;
}

/// The records that are a single line: header, context and end; std::nullopt
/// if \p O is none of them.
static Expected<std::optional<Record>>
parseCommonLine(const json::Object &O, const DecoderLimits &Limits,
                StringRef SerDesName, uint64_t Offset) {
  std::string Where = " at byte offset " + std::to_string(Offset);
  if (O.get("features")) {
    Expected<Header> H = parseHeader(O, Limits);
    if (!H)
      return decodeError(SerDesName, "invalid header" + Where + ": " +
                                         toString(H.takeError()));
    return Record(std::move(*H));
  }
  if (const json::Value *C = O.get("context")) {
    std::optional<StringRef> Name = C->getAsString();
    if (!Name)
      return decodeError(SerDesName,
                         "context record" + Where + " is not a string");
    return Record(Context{Name->str()});
  }
  if (const json::Value *E = O.get("end")) {
    if (E->getAsBoolean() != std::optional<bool>(true))
      return decodeError(SerDesName,
                         "end record" + Where + " must be {\"end\":true}");
    return Record(End{});
  }
  return std::nullopt;
}

Expected<std::optional<LineRecord>>
readLineRecord(ByteReader &Reader, const DecoderLimits &Limits,
               StringRef SerDesName, std::optional<Header> &CurrentHeader,
               std::string &Line, uint64_t &Offset) {
  Offset = Reader.offset();
  if (Error E = Reader.readLine(Line, Limits.MaxMessageBytes)) {
    if (isEndOfStream(E)) {
      consumeError(std::move(E));
      return std::nullopt;
    }
    return decodeError(SerDesName, toString(std::move(E)));
  }
  Expected<json::Value> V = json::parse(Line);
  if (!V)
    return decodeError(SerDesName, "invalid JSON line at byte offset " +
                                       Twine(Offset) + ": " +
                                       toString(V.takeError()));
  json::Object *O = V->getAsObject();
  if (!O)
    return decodeError(SerDesName, "line at byte offset " + Twine(Offset) +
                                       " is not a JSON object");
  Expected<std::optional<Record>> Common =
      parseCommonLine(*O, Limits, SerDesName, Offset);
  if (!Common)
    return Common.takeError();
  if (*Common) {
    if (const Header *H = std::get_if<Header>(&**Common))
      CurrentHeader = *H;
    return LineRecord(std::move(**Common));
  }
  for (MessageKind Kind :
       {MessageKind::Observation, MessageKind::Outcome, MessageKind::Advice}) {
    const json::Value *IdValue = O->get(messageKindName(Kind));
    if (!IdValue)
      continue;
    std::optional<int64_t> Id = IdValue->getAsInteger();
    if (!Id)
      return decodeError(SerDesName, "message id at byte offset " +
                                         Twine(Offset) + " is not an integer");
    return LineRecord(MessageLine{Kind, *Id, std::move(*O)});
  }
  return decodeError(SerDesName,
                     "unrecognized record at byte offset " + Twine(Offset));
}

Error inRecord(Error E, const Twine &What) {
  if (!E)
    return E;
  std::string Msg;
  handleAllErrors(
      std::move(E),
      [&](const EndOfStreamError &EOS) {
        Msg = ("input truncated at byte offset " + Twine(EOS.offset()) +
               " while reading " + What)
                  .str();
      },
      [&](const ErrorInfoBase &Other) {
        Msg = (Twine(Other.message()) + " (while reading " + What + ")").str();
      });
  return createStringError(inconvertibleErrorCode(), Msg);
}

} // namespace mlbridge
