//===- Common.cpp - Helpers shared by the SerDes implementations ----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "llvm/ADT/StringSet.h"

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
  // Strict as the Python decoder: no unknown keys, no duplicate names.
  for (const auto &KV : O)
    if (KV.first != "features" && KV.first != "score" && KV.first != "advice")
      return createStringError(inconvertibleErrorCode(),
                               "header has an unknown key '%s'",
                               KV.first.str().c_str());
  // Also checks dimensions against the limit before the spec is built (a
  // spec refuses a shape of too many elements in words of its own).
  auto CheckSpecKeys = [&Limits](const json::Value &V) -> Error {
    const json::Object *S = V.getAsObject();
    if (!S)
      return Error::success();
    for (const auto &KV : *S)
      if (KV.first != "name" && KV.first != "type" && KV.first != "port" &&
          KV.first != "shape")
        return createStringError(inconvertibleErrorCode(),
                                 "tensor spec has an unknown key '%s'",
                                 KV.first.str().c_str());
    if (const json::Array *Shape = S->getArray("shape"))
      for (const json::Value &D : *Shape)
        if (std::optional<int64_t> N = D.getAsInteger();
            N && *N > Limits.MaxDimension)
          return createStringError(
              inconvertibleErrorCode(),
              "spec '%s' has dimension %lld, above the limit of %lld "
              "(MaxDimension)",
              S->getString("name").value_or("?").str().c_str(),
              static_cast<long long>(*N),
              static_cast<long long>(Limits.MaxDimension));
    return Error::success();
  };
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
    if (Error E = CheckSpecKeys(V))
      return E;
    Expected<TensorSpec> Spec = TensorSpec::fromJSON(V);
    if (!Spec)
      return Spec.takeError();
    if (Error E = checkSpecLimits(*Spec, Limits))
      return E;
    H.Features.push_back(std::move(*Spec));
  }
  StringSet<> Names;
  for (const TensorSpec &Spec : H.Features)
    if (!Names.insert(Spec.name()).second)
      return createStringError(inconvertibleErrorCode(),
                               "duplicate feature '%s'", Spec.name().c_str());
  for (auto [Key, Slot] : {std::pair(StringRef("advice"), &H.Advice),
                           std::pair(StringRef("score"), &H.Score)}) {
    const json::Value *V = O.get(Key);
    if (!V || V->kind() == json::Value::Null)
      continue;
    if (Error E = CheckSpecKeys(*V))
      return E;
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
  if (Error E = checkJSONDepth(Line, Limits.MaxDepth, SerDesName, Offset))
    return E;
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

Error checkJSONDepth(StringRef Line, size_t MaxDepth, StringRef SerDesName,
                     uint64_t Offset) {
  size_t Depth = 0;
  for (size_t I = 0, N = Line.size(); I < N; ++I) {
    char C = Line[I];
    if (C == '"') {
      // Skip the string; an unterminated one runs to the end of the line.
      for (++I; I < N && Line[I] != '"'; ++I)
        if (Line[I] == '\\')
          ++I;
      continue;
    }
    if (C == '[' || C == '{') {
      if (++Depth > MaxDepth)
        return decodeError(SerDesName,
                           "line at byte offset " + Twine(Offset) +
                               " nests JSON arrays and objects more than " +
                               Twine(MaxDepth) + " deep (MaxDepth)");
    } else if ((C == ']' || C == '}') && Depth > 0) {
      --Depth;
    }
  }
  return Error::success();
}

Error readGrowing(ByteReader &Reader, std::string &Out, uint64_t Size) {
  Out.clear();
  constexpr uint64_t FirstChunk = uint64_t(64) << 10;
  uint64_t Start = Reader.offset();
  while (Out.size() < Size) {
    uint64_t Have = Out.size();
    uint64_t Chunk = std::min(Size - Have, std::max(FirstChunk, Have));
    Out.resize(Have + Chunk);
    if (Error E =
            Reader.readExact(MutableArrayRef<char>(Out.data() + Have, Chunk))) {
      if (Have == 0 && isEndOfStream(E))
        return E;
      consumeError(std::move(E));
      return createStringError(
          inconvertibleErrorCode(),
          "input truncated: needed %llu bytes from byte offset %llu, the "
          "input ends before byte %llu",
          static_cast<unsigned long long>(Size),
          static_cast<unsigned long long>(Start),
          static_cast<unsigned long long>(Start + Have + Chunk));
    }
  }
  return Error::success();
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
