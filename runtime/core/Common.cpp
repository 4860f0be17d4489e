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
  // The same order as the Python decoder, so that a header with several
  // faults gets the same error class in both: the feature count, then every
  // malformed spec (unknown keys, types, shapes whose element count overflows
  // int64, duplicate names), and only then the rank and dimension limits.
  auto ParseSpec = [](const json::Value &V) -> Expected<TensorSpec> {
    if (const json::Object *S = V.getAsObject())
      for (const auto &KV : *S)
        if (KV.first != "name" && KV.first != "type" && KV.first != "port" &&
            KV.first != "shape" && KV.first != "range" && KV.first != "mask")
          return createStringError(inconvertibleErrorCode(),
                                   "tensor spec has an unknown key '%s'",
                                   KV.first.str().c_str());
    return TensorSpec::fromJSON(V);
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
    Expected<TensorSpec> Spec = ParseSpec(V);
    if (!Spec)
      return Spec.takeError();
    H.Features.push_back(std::move(*Spec));
  }
  for (auto [Key, Slot] : {std::pair(StringRef("score"), &H.Score),
                           std::pair(StringRef("advice"), &H.Advice)}) {
    const json::Value *V = O.get(Key);
    if (!V || V->kind() == json::Value::Null)
      continue;
    Expected<TensorSpec> Spec = ParseSpec(*V);
    if (!Spec)
      return Spec.takeError();
    *Slot = std::move(*Spec);
  }
  StringSet<> Names;
  for (const TensorSpec &Spec : H.Features)
    if (!Names.insert(Spec.name()).second)
      return createStringError(inconvertibleErrorCode(),
                               "duplicate feature '%s'", Spec.name().c_str());
  for (const TensorSpec &Spec : H.Features)
    if (Error E = checkSpecLimits(Spec, Limits))
      return E;
  for (const std::optional<TensorSpec> *Spec : {&H.Score, &H.Advice})
    if (*Spec)
      if (Error E = checkSpecLimits(**Spec, Limits))
        return E;
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
  // A context or end line has that one key, as in Python: a message line
  // with a "context" key is not a context.
  if (const json::Value *C = O.get("context")) {
    std::optional<StringRef> Name = C->getAsString();
    if (!Name || O.size() != 1)
      return decodeError(SerDesName, "context record" + Where +
                                         " must be {\"context\":<string>}");
    return Record(Context{Name->str()});
  }
  if (const json::Value *E = O.get("end")) {
    if (E->getAsBoolean() != std::optional<bool>(true) || O.size() != 1)
      return decodeError(SerDesName,
                         "end record" + Where + " must be {\"end\":true}");
    return Record(End{});
  }
  return std::nullopt;
}

Error checkMessageKeys(const MessageLine &ML, StringRef Other,
                       StringRef SerDesName, uint64_t Offset) {
  StringRef Kind = messageKindName(ML.Kind);
  std::vector<std::string> Unknown;
  for (const auto &KV : ML.Object) {
    StringRef Key = KV.first;
    if (Key != Kind && Key != Other)
      Unknown.push_back(Key.str());
  }
  if (Unknown.empty())
    return Error::success();
  llvm::sort(Unknown);
  std::string List;
  for (const std::string &K : Unknown)
    List += (List.empty() ? "'" : ", '") + K + "'";
  return decodeError(SerDesName, Kind + " record at byte offset " +
                                     Twine(Offset) + " has unknown keys [" +
                                     List + "] (it may have '" + Other + "')");
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
  if (Error E = checkJSONLine(Line, Limits.MaxDepth, SerDesName, Offset))
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

namespace {

/// A JSON container open at the scan's position: an object remembers its
/// current key (the raw text between the quotes) and whether a key comes next.
struct LexFrame {
  bool IsObject;
  bool ExpectKey;
  StringRef Key;
  /// The keys seen so far in this object, decoded.
  SmallVector<std::string, 4> Keys = {};
};

/// The decoded form of the key between quotes at \p Quoted (escapes are rare:
/// only then is the string parsed).
std::string decodeKey(StringRef Quoted) {
  StringRef Raw = Quoted.drop_front().drop_back();
  if (!Raw.contains('\\'))
    return Raw.str();
  Expected<json::Value> V = json::parse(Quoted);
  if (!V) {
    consumeError(V.takeError());
    return Raw.str(); // the parser names the bad escape later
  }
  std::optional<StringRef> S = V->getAsString();
  return S ? S->str() : Raw.str();
}

bool isHex(char C) {
  return (C >= '0' && C <= '9') || (C >= 'a' && C <= 'f') ||
         (C >= 'A' && C <= 'F');
}

/// The code unit of the `\uXXXX` escape at \p Line[I] (which is the 'u'), or
/// -1 if it is not one.
int escapedUnit(StringRef Line, size_t I) {
  if (I + 4 >= Line.size() || !isHex(Line[I + 1]) || !isHex(Line[I + 2]) ||
      !isHex(Line[I + 3]) || !isHex(Line[I + 4]))
    return -1;
  unsigned Unit = 0;
  Line.substr(I + 1, 4).getAsInteger(16, Unit);
  return static_cast<int>(Unit);
}

/// Whether \p Token follows JSON's number grammar:
/// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool isJSONNumber(StringRef Token, bool &IsInteger) {
  size_t I = 0, N = Token.size();
  auto Digits = [&]() {
    size_t Start = I;
    while (I < N && Token[I] >= '0' && Token[I] <= '9')
      ++I;
    return I - Start;
  };
  if (I < N && Token[I] == '-')
    ++I;
  if (I < N && Token[I] == '0')
    ++I;
  else if (!Digits())
    return false;
  IsInteger = true;
  if (I < N && Token[I] == '.') {
    ++I;
    IsInteger = false;
    if (!Digits())
      return false;
  }
  if (I < N && (Token[I] == 'e' || Token[I] == 'E')) {
    ++I;
    IsInteger = false;
    if (I < N && (Token[I] == '+' || Token[I] == '-'))
      ++I;
    if (!Digits())
      return false;
  }
  return I == N;
}

/// Whether a number at the top of \p Stack is one the records define as an
/// integer: a message id, a port, a dimension of a `shape` (or of a tensor in
/// a bitstream message's `shapes`).
bool inIntegerPosition(ArrayRef<LexFrame> Stack) {
  if (Stack.empty())
    return false;
  const LexFrame &Top = Stack.back();
  if (Top.IsObject)
    return Top.Key == "observation" || Top.Key == "outcome" ||
           Top.Key == "advice" || Top.Key == "port";
  if (Stack.size() >= 2 && Stack[Stack.size() - 2].IsObject) {
    if (Stack[Stack.size() - 2].Key == "shape")
      return true;
    return Stack.size() >= 3 && Stack[Stack.size() - 3].IsObject &&
           Stack[Stack.size() - 3].Key == "shapes";
  }
  return false;
}

} // namespace

Error checkJSONLine(StringRef Line, size_t MaxDepth, StringRef SerDesName,
                    uint64_t Offset) {
  auto Fail = [&](const Twine &What) {
    return decodeError(SerDesName,
                       "line at byte offset " + Twine(Offset) + " " + What);
  };
  // The depth first, over the whole line, as the Python side does: a line
  // that is both too deep and lexically wrong is a limit error in both.
  size_t Depth = 0;
  for (size_t I = 0, N = Line.size(); I < N; ++I) {
    char C = Line[I];
    if (C == '"') {
      for (++I; I < N && Line[I] != '"'; ++I)
        if (Line[I] == '\\')
          ++I;
    } else if (C == '[' || C == '{') {
      if (++Depth > MaxDepth)
        return Fail("nests JSON arrays and objects more than " +
                    Twine(MaxDepth) + " deep (MaxDepth)");
    } else if ((C == ']' || C == '}') && Depth > 0) {
      --Depth;
    }
  }
  SmallVector<LexFrame, 8> Stack;
  for (size_t I = 0, N = Line.size(); I < N; ++I) {
    char C = Line[I];
    if (C == '"') {
      // A string: escapes checked as JSON reads them (a surrogate pair whole);
      // an unterminated one runs to the end of the line for the parser to name.
      size_t Start = I + 1;
      for (++I; I < N && Line[I] != '"'; ++I) {
        if (Line[I] != '\\')
          continue;
        if (++I < N && Line[I] == 'u') {
          int Unit = escapedUnit(Line, I);
          if (Unit >= 0xDC00 && Unit <= 0xDFFF)
            return Fail(
                "has a low surrogate escape without a high one before it");
          if (Unit >= 0xD800 && Unit <= 0xDBFF) {
            int Low = I + 6 < N && Line[I + 5] == '\\' && Line[I + 6] == 'u'
                          ? escapedUnit(Line, I + 6)
                          : -1;
            if (Low < 0xDC00 || Low > 0xDFFF)
              return Fail(
                  "has a high surrogate escape without a low one after it");
            I += 6;
          }
          if (Unit >= 0)
            I += 4;
        }
      }
      if (!Stack.empty() && Stack.back().IsObject && Stack.back().ExpectKey) {
        LexFrame &Top = Stack.back();
        Top.Key = Line.slice(Start, std::min(I, N));
        // llvm::json keeps the last of duplicate keys, as Python's parser
        // does, but its earlier values would still be checked here: both
        // sides refuse duplicates instead.
        std::string Key = decodeKey(Line.slice(Start - 1, std::min(I + 1, N)));
        if (llvm::is_contained(Top.Keys, Key))
          return Fail("has a duplicate key '" + Key + "' in an object");
        Top.Keys.push_back(std::move(Key));
        Top.ExpectKey = false;
      }
      continue;
    }
    if (C == '-' && I + 1 < N && (Line[I + 1] == 'I' || Line[I + 1] == 'N'))
      continue; // -Infinity, -NaN: float literals the data parser reads.
    if (C == '-' || (C >= '0' && C <= '9')) {
      size_t End = I;
      while (End < N &&
             (Line[End] == '-' || Line[End] == '+' || Line[End] == '.' ||
              Line[End] == 'e' || Line[End] == 'E' ||
              (Line[End] >= '0' && Line[End] <= '9')))
        ++End;
      StringRef Token = Line.slice(I, End);
      bool IsInteger = false;
      if (!isJSONNumber(Token, IsInteger))
        return Fail("has an invalid JSON number '" + Token +
                    "' (a leading zero, a bare '.', an empty exponent)");
      int64_t Value;
      if (IsInteger && inIntegerPosition(Stack) &&
          Token.getAsInteger(10, Value))
        return Fail("has '" + Token + "' where an integer is expected, " +
                    "outside the 64-bit range");
      if (!IsInteger && inIntegerPosition(Stack))
        return Fail("has '" + Token + "' where an integer is expected (" +
                    (Stack.back().IsObject ? "'" + Stack.back().Key.str() + "'"
                                           : std::string("a dimension")) +
                    ")");
      I = End - 1;
      continue;
    }
    switch (C) {
    case '+':
      // llvm::json::parse takes "+1" as a number; JSON (and Python) do not.
      return Fail("has '+' outside a string (a JSON number has no plus sign)");
    case '.':
      // llvm::json::parse takes ".5" as a number; JSON (and Python) do not.
      return Fail("has a number starting with '.' (a JSON number starts with "
                  "a digit or '-')");
    case '{':
    case '[':
      Stack.push_back({C == '{', C == '{', StringRef()});
      break;
    case '}':
    case ']':
      if (!Stack.empty())
        Stack.pop_back();
      break;
    case ':':
      if (!Stack.empty() && Stack.back().IsObject)
        Stack.back().ExpectKey = false;
      break;
    case ',':
      if (!Stack.empty() && Stack.back().IsObject)
        Stack.back().ExpectKey = true;
      break;
    default:
      break;
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
      std::error_code Code;
      std::string Why;
      handleAllErrors(std::move(E), [&](const ErrorInfoBase &Info) {
        Code = Info.convertToErrorCode();
        Why = Info.message();
      });
      // A read that ran out of time is a timeout, not a truncation: nothing
      // ended, the peer is still there.
      if (Code == std::errc::timed_out)
        return createStringError(
            Code, "%s (while reading %llu bytes from byte offset %llu)",
            Why.c_str(), static_cast<unsigned long long>(Size),
            static_cast<unsigned long long>(Start));
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
