//===- JSON.cpp - The JSON Lines SerDes -----------------------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Writes with a direct, allocation-light writer in the canonical layout of
// docs/serialization.md; reads with llvm::json::parse plus a lexical pass
// that keeps each data element's literal, because llvm::json does not say
// whether `-5.0` was written as an integer.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/SerDes/JSON.h"
#include "Common.h"
#include "ShortestFloat.h"

#include "llvm/ADT/SmallString.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

using namespace llvm;

namespace mlbridge {

static constexpr StringLiteral Name = "json";

/// The most characters one float or double element takes: a sign, 17
/// digits, "0." and up to 5 leading zeros (fixed), or "e-308" (scientific);
/// "\"-Infinity\"" is 11.
static constexpr size_t MaxFloatChars = 32;

/// Writes \p V at \p P in the layout of docs/serialization.md and returns the
/// end. Calls std::to_chars(scientific) once, which gives the shortest
/// round-trip digits as "d[.ddd]e<sign><2+ digits>", and re-lays them out in
/// place: no allocation. Fixed notation for exponents in [MinFixed, MaxFixed].
template <typename T>
static char *formatFloating(T V, int MinFixed, int MaxFixed, char *P) {
  if (std::isnan(V)) {
    std::memcpy(P, "\"NaN\"", 5);
    return P + 5;
  }
  if (std::isinf(V)) {
    if (V < 0) {
      std::memcpy(P, "\"-Infinity\"", 11);
      return P + 11;
    }
    std::memcpy(P, "\"Infinity\"", 10);
    return P + 10;
  }
  char Buf[48];
  char *End =
      std::to_chars(Buf, Buf + sizeof(Buf), V, std::chars_format::scientific)
          .ptr;
  const char *S = Buf;
  if (*S == '-') {
    *P++ = '-';
    ++S;
  }
  // Digits: S[0], then S[2..) up to 'e' when S[1] == '.'.
  char Digits[24];
  int NumDigits = 0;
  Digits[NumDigits++] = *S++;
  if (*S == '.')
    for (++S; *S != 'e'; ++S)
      Digits[NumDigits++] = *S;
  ++S; // 'e'
  bool NegExp = *S++ == '-';
  int Exp = 0;
  for (; S != End; ++S)
    Exp = Exp * 10 + (*S - '0');
  if (NegExp)
    Exp = -Exp;
  if (NumDigits == 1 && Digits[0] == '0') {
    std::memcpy(P, "0.0", 3);
    return P + 3;
  }
  if (Exp >= MinFixed && Exp <= MaxFixed) {
    if (Exp < 0) {
      *P++ = '0';
      *P++ = '.';
      for (int I = -Exp - 1; I > 0; --I)
        *P++ = '0';
      std::memcpy(P, Digits, NumDigits);
      return P + NumDigits;
    }
    if (NumDigits <= Exp + 1) {
      std::memcpy(P, Digits, NumDigits);
      P += NumDigits;
      for (int I = Exp + 1 - NumDigits; I > 0; --I)
        *P++ = '0';
      *P++ = '.';
      *P++ = '0';
      return P;
    }
    std::memcpy(P, Digits, Exp + 1);
    P += Exp + 1;
    *P++ = '.';
    std::memcpy(P, Digits + Exp + 1, NumDigits - Exp - 1);
    return P + (NumDigits - Exp - 1);
  }
  *P++ = Digits[0];
  if (NumDigits > 1) {
    *P++ = '.';
    std::memcpy(P, Digits + 1, NumDigits - 1);
    P += NumDigits - 1;
  }
  *P++ = 'e';
  *P++ = NegExp ? '-' : '+';
  if (NegExp)
    Exp = -Exp;
  return std::to_chars(P, P + 8, Exp).ptr;
}

/// Two-digit strings "00" to "99", for writing digits two at a time.
static constexpr char DigitPairs[] = "00010203040506070809"
                                     "10111213141516171819"
                                     "20212223242526272829"
                                     "30313233343536373839"
                                     "40414243444546474849"
                                     "50515253545556575859"
                                     "60616263646566676869"
                                     "70717273747576777879"
                                     "80818283848586878889"
                                     "90919293949596979899";

/// Writes the decimal digits of \p V so that the last one is at End[-1].
static void writeDigitsBackwards(uint32_t V, char *End) {
  while (V >= 100) {
    End -= 2;
    std::memcpy(End, DigitPairs + 2 * (V % 100), 2);
    V /= 100;
  }
  if (V >= 10) {
    std::memcpy(End - 2, DigitPairs + 2 * V, 2);
  } else {
    End[-1] = static_cast<char>('0' + V);
  }
}

/// Writes \p V like formatFloating<float>(V, -6, 12, P), with the digits of
/// shortest::toDecimal() instead of std::to_chars (several times faster).
LLVM_ATTRIBUTE_ALWAYS_INLINE static char *formatFloat32(float V, char *P) {
  uint32_t Bits;
  std::memcpy(&Bits, &V, 4);
  uint32_t Magnitude = Bits & 0x7fffffffu;
  if (Magnitude == 0 || Magnitude >= 0x7f800000u) // zero, infinity, NaN
    return formatFloating(V, -6, 12, P);
  if (Bits >> 31)
    *P++ = '-';
  shortest::Decimal32 D = shortest::toDecimal(Magnitude);
  uint32_t V9 = D.Digits; // at most 9 digits
  int NumDigits = 1 + (V9 >= 10) + (V9 >= 100) + (V9 >= 1000) + (V9 >= 10000) +
                  (V9 >= 100000) + (V9 >= 1000000) + (V9 >= 10000000) +
                  (V9 >= 100000000);
  int Exp = D.Exponent + NumDigits - 1; // scientific: d.ddd x 10^Exp
  // The digits go straight to their place (staging them in a buffer costs a
  // store-forwarding stall per number); a '.' inside them is made room for.
  if (Exp >= -6 && Exp <= 12) {
    if (Exp < 0) {
      // "0." and up to five zeros: a fixed 8-byte copy is one store (the
      // digits overwrite what is not needed; a number has MaxFloatChars).
      std::memcpy(P, "0.000000", 8);
      P += 2 - Exp - 1;
      writeDigitsBackwards(V9, P + NumDigits);
      return P + NumDigits;
    }
    if (NumDigits <= Exp + 1) {
      writeDigitsBackwards(V9, P + NumDigits);
      P += NumDigits;
      for (int I = Exp + 1 - NumDigits; I > 0; --I)
        *P++ = '0';
      std::memcpy(P, ".0", 2);
      return P + 2;
    }
    writeDigitsBackwards(V9, P + NumDigits + 1);
    std::memmove(P, P + 1, Exp + 1);
    P[Exp + 1] = '.';
    return P + NumDigits + 1;
  }
  writeDigitsBackwards(V9, P + NumDigits + 1);
  P[0] = P[1];
  if (NumDigits > 1) {
    P[1] = '.';
    P += NumDigits + 1;
  } else {
    P += 1;
  }
  *P++ = 'e';
  *P++ = Exp < 0 ? '-' : '+';
  return std::to_chars(P, P + 8, Exp < 0 ? -Exp : Exp).ptr;
}

template <typename T>
static void writeFloating(T V, int MinFixed, int MaxFixed, std::string &Out) {
  char Buf[MaxFloatChars];
  char *End = formatFloating(V, MinFixed, MaxFixed, Buf);
  Out.append(Buf, End);
}

void writeJSONDouble(double V, std::string &Out) {
  writeFloating(V, -5, 15, Out);
}

void writeJSONFloat(float V, std::string &Out) {
  char Buf[MaxFloatChars];
  Out.append(Buf, formatFloat32(V, Buf));
}

/// Writes \p N comma-separated elements of type \p T from \p Data, formatting
/// each with \p Format (a `char *(T, char *)` writing at most \p MaxChars).
/// Formats a block of elements at a time into a local buffer.
template <typename T, size_t MaxChars, typename FormatFn>
static void writeElements(const char *Data, size_t N, std::string &Out,
                          FormatFn Format) {
  // Formatted into a local block, then appended: growing \p Out first would
  // zero-fill the worst case, several times the bytes written.
  constexpr size_t Block = 256;
  char Buf[Block * (MaxChars + 1)];
  for (size_t I = 0; I < N;) {
    size_t Count = std::min(Block, N - I);
    char *P = Buf;
    for (size_t J = 0; J < Count; ++J, ++I) {
      T V;
      std::memcpy(&V, Data + I * sizeof(T), sizeof(T));
      if (I)
        *P++ = ',';
      P = Format(V, P);
    }
    Out.append(Buf, P - Buf);
  }
}

template <typename T>
static void writeInts(const char *Data, size_t N, std::string &Out) {
  writeElements<T, 20>(Data, N, Out, [](T V, char *P) {
    return std::to_chars(P, P + 20, V).ptr;
  });
}

static Error writeData(const TensorRef &T, std::string &Out) {
  const char *D = T.bytes().data();
  size_t N = T.getElementCount();
  switch (T.type()) {
  case ElementType::Int8:
    writeInts<int8_t>(D, N, Out);
    break;
  case ElementType::UInt8:
    writeInts<uint8_t>(D, N, Out);
    break;
  case ElementType::Int16:
    writeInts<int16_t>(D, N, Out);
    break;
  case ElementType::UInt16:
    writeInts<uint16_t>(D, N, Out);
    break;
  case ElementType::Int32:
    writeInts<int32_t>(D, N, Out);
    break;
  case ElementType::UInt32:
    writeInts<uint32_t>(D, N, Out);
    break;
  case ElementType::Int64:
    writeInts<int64_t>(D, N, Out);
    break;
  case ElementType::UInt64:
    writeInts<uint64_t>(D, N, Out);
    break;
  case ElementType::Float:
    Out.reserve(Out.size() + N * 12);
    writeElements<float, MaxFloatChars>(
        D, N, Out, [](float V, char *P) { return formatFloat32(V, P); });
    break;
  case ElementType::Double:
    Out.reserve(Out.size() + N * 20);
    writeElements<double, MaxFloatChars>(D, N, Out, [](double V, char *P) {
      return formatFloating(V, -5, 15, P);
    });
    break;
  case ElementType::Bool:
    for (size_t I = 0; I < N; ++I) {
      if (I)
        Out += ',';
      if (D[I] != 0 && D[I] != 1)
        return createStringError(inconvertibleErrorCode(),
                                 "json: bool element %zu of tensor '%s' is "
                                 "byte %u (must be 0 or 1)",
                                 I, T.name().str().c_str(),
                                 static_cast<unsigned char>(D[I]));
      Out += D[I] ? "true" : "false";
    }
    break;
  case ElementType::String: {
    size_t I = 0;
    for (const std::string &S : T.strings()) {
      size_t Bad = 0;
      if (!json::isUTF8(S, &Bad))
        return createStringError(
            inconvertibleErrorCode(),
            "json: string element %zu of tensor '%s' is not valid UTF-8 "
            "(byte %zu); use the bitstream or protobuf SerDes for binary "
            "data",
            I, T.name().str().c_str(), Bad);
      if (I++)
        Out += ',';
      writeJSONString(S, Out);
    }
    break;
  }
  }
  return Error::success();
}

namespace {

/// The literal text of every number in `tensors[i].data[j]` of one message
/// line, found by a lexical pass over text that llvm::json already accepted.
/// Later duplicate keys win, as in llvm::json.
class DataLiterals {
public:
  explicit DataLiterals(StringRef Line) { scan(Line); }
  /// The literals of tensor \p I (empty if it has none).
  ArrayRef<StringRef> of(size_t I) const {
    return I < Tensors.size() ? ArrayRef<StringRef>(Tensors[I])
                              : ArrayRef<StringRef>();
  }

private:
  struct Frame {
    bool IsObject;
    std::string Key;  // Current key of an object.
    size_t Index = 0; // Current index of an array.
  };

  void scan(StringRef S) {
    std::vector<Frame> Stack;
    bool ExpectKey = false;
    for (size_t I = 0; I < S.size();) {
      char C = S[I];
      switch (C) {
      case '{':
        Stack.push_back({true, "", 0});
        ExpectKey = true;
        onContainerStart(Stack);
        ++I;
        continue;
      case '[':
        Stack.push_back({false, "", 0});
        onContainerStart(Stack);
        ++I;
        continue;
      case '}':
      case ']':
        Stack.pop_back();
        ExpectKey = false;
        ++I;
        continue;
      case ',':
        if (!Stack.empty()) {
          if (Stack.back().IsObject)
            ExpectKey = true;
          else
            ++Stack.back().Index;
        }
        ++I;
        continue;
      case ':':
      case ' ':
      case '\t':
      case '\r':
      case '\n':
        ++I;
        continue;
      case '"': {
        size_t End = I + 1;
        bool Escaped = false;
        while (End < S.size() && S[End] != '"') {
          if (S[End] == '\\') {
            Escaped = true;
            ++End;
          }
          ++End;
        }
        StringRef Token = S.slice(I, End + 1);
        if (ExpectKey && !Stack.empty()) {
          Stack.back().Key = decodeKey(Token, Escaped);
          ExpectKey = false;
        }
        I = End + 1;
        continue;
      }
      default: {
        size_t End = I;
        while (End < S.size() && !StringRef(",]}: \t\r\n").contains(S[End]))
          ++End;
        if (C == '-' || (C >= '0' && C <= '9'))
          onNumber(Stack, S.slice(I, End));
        I = End;
        continue;
      }
      }
    }
  }

  static std::string decodeKey(StringRef Token, bool Escaped) {
    if (!Escaped)
      return Token.drop_front().drop_back().str();
    Expected<json::Value> V = json::parse(Token);
    if (!V) {
      consumeError(V.takeError());
      return std::string();
    }
    return V->getAsString().value_or("").str();
  }

  /// True if \p Stack is at `root.tensors[i].data`.
  static bool atData(ArrayRef<Frame> Stack) {
    return Stack.size() == 4 && Stack[0].IsObject &&
           Stack[0].Key == "tensors" && !Stack[1].IsObject &&
           Stack[2].IsObject && Stack[2].Key == "data" && !Stack[3].IsObject;
  }

  void onContainerStart(ArrayRef<Frame> Stack) {
    // A new `tensors` or `data` array replaces an earlier duplicate.
    if (Stack.size() == 2 && Stack[0].Key == "tensors" && !Stack[1].IsObject)
      Tensors.clear();
    if (atData(Stack)) {
      size_t T = Stack[1].Index;
      if (Tensors.size() <= T)
        Tensors.resize(T + 1);
      Tensors[T].clear();
    }
  }

  void onNumber(ArrayRef<Frame> Stack, StringRef Token) {
    if (atData(Stack))
      Tensors[Stack[1].Index].push_back(Token);
  }

  std::vector<std::vector<StringRef>> Tensors;
};

class JSONSerDes final : public LineSerDes {
public:
  explicit JSONSerDes(const DecoderLimits &Limits)
      : LineSerDes(SerDesKind::JSON, Limits) {}

  Error encodeMessage(MessageKind Kind, int64_t Id, ArrayRef<TensorRef> Tensors,
                      std::string &Out) override;

  Expected<std::optional<Record>> decode(ByteReader &Reader) override;

private:
  Expected<TensorValue> decodeTensor(const json::Value &V, size_t Index,
                                     const DataLiterals &Literals,
                                     uint64_t Offset) const;
};

} // namespace

Error JSONSerDes::encodeMessage(MessageKind Kind, int64_t Id,
                                ArrayRef<TensorRef> Tensors, std::string &Out) {
  size_t OldSize = Out.size();
  auto Fail = [&](Error E) {
    Out.resize(OldSize);
    return E;
  };
  Out += "{\"";
  Out += messageKindName(Kind);
  Out += "\":";
  Out += std::to_string(Id);
  Out += ",\"tensors\":[";
  for (size_t I = 0; I < Tensors.size(); ++I) {
    const TensorRef &T = Tensors[I];
    std::optional<uint64_t> Count;
    if (llvm::all_of(T.shape(), [](int64_t D) { return D >= 0; }))
      Count = shapeElementCount(T.shape());
    if (!Count || *Count != T.getElementCount() ||
        (T.type() != ElementType::String &&
         T.bytes().size() != *Count * elementSize(T.type())))
      return Fail(createStringError(
          inconvertibleErrorCode(),
          "json: tensor '%s' holds %zu elements, its shape %s needs %llu",
          T.name().str().c_str(), T.getElementCount(),
          formatShape(T.shape()).c_str(),
          static_cast<unsigned long long>(Count.value_or(0))));
    if (!json::isUTF8(T.name()))
      return Fail(createStringError(inconvertibleErrorCode(),
                                    "json: tensor name is not valid UTF-8"));
    if (I)
      Out += ',';
    Out += "{\"name\":";
    writeJSONString(T.name(), Out);
    Out += ",\"type\":\"";
    Out += elementTypeName(T.type());
    Out += "\",\"shape\":";
    writeShapeJSON(T.shape(), Out);
    Out += ",\"data\":[";
    if (Error E = writeData(T, Out))
      return Fail(std::move(E));
    Out += "]}";
  }
  Out += "]}\n";
  return Error::success();
}

/// Parses an integer literal of type \p T into \p Dest.
template <typename T> static bool parseInt(StringRef Token, char *Dest) {
  T V;
  std::from_chars_result R = std::from_chars(Token.begin(), Token.end(), V, 10);
  if (R.ec != std::errc() || R.ptr != Token.end())
    return false;
  std::memcpy(Dest, &V, sizeof(T));
  return true;
}

/// Parses a JSON number literal as \p T, rounding once from the decimal.
template <typename T> static bool parseFloat(StringRef Token, char *Dest) {
  T V;
  std::from_chars_result R = std::from_chars(Token.begin(), Token.end(), V);
  if (R.ptr != Token.end())
    return false;
  if (R.ec == std::errc::result_out_of_range) {
    // Overflow and underflow still denote a value (inf or a tiny number);
    // strtod rounds them as a JSON reader should.
    std::string S = Token.str();
    if constexpr (std::is_same_v<T, float>)
      V = std::strtof(S.c_str(), nullptr);
    else
      V = std::strtod(S.c_str(), nullptr);
  } else if (R.ec != std::errc()) {
    return false;
  }
  std::memcpy(Dest, &V, sizeof(T));
  return true;
}

/// An element's error, for the caller to prefix with the tensor and index.
using ElementError = function_ref<Error(const Twine &Why)>;

/// Checks that \p V is a tensor object with exactly the keys name, type,
/// shape and data, in any order (the Python side agrees).
static Expected<const json::Object *> tensorObject(const json::Value &V,
                                                   const std::string &Where) {
  const json::Object *O = V.getAsObject();
  if (!O)
    return decodeError(Name, Where + " is not an object");
  if (O->size() != 4 || !O->get("name") || !O->get("type") ||
      !O->get("shape") || !O->get("data"))
    return decodeError(Name, Where + " must be an object with exactly the keys "
                                     "name, type, shape and data");
  return O;
}

/// Reads the `shape` of tensor object \p O: an array of at most \p MaxRank
/// integers.
static Expected<std::vector<int64_t>>
decodeShape(const json::Object &O, size_t MaxRank, const std::string &Where) {
  const json::Array *ShapeA = O.getArray("shape");
  if (!ShapeA)
    return decodeError(Name, Where + " has no shape array");
  if (ShapeA->size() > MaxRank)
    return decodeError(Name, Where + " has rank " + Twine(ShapeA->size()) +
                                 ", above the limit of " + Twine(MaxRank) +
                                 " (MaxRank)");
  std::vector<int64_t> Shape;
  for (const json::Value &D : *ShapeA) {
    std::optional<int64_t> N = D.getAsInteger();
    if (!N)
      return decodeError(Name, Where + " has a non-integer dimension");
    Shape.push_back(*N);
  }
  return Shape;
}

/// Reads the elements of a string tensor.
static Expected<TensorValue> decodeStrings(StringRef TName,
                                           ArrayRef<int64_t> Shape,
                                           const json::Array &Data,
                                           const std::string &Where) {
  std::vector<std::string> Strings;
  Strings.reserve(Data.size());
  for (const json::Value &E : Data) {
    std::optional<StringRef> S = E.getAsString();
    if (!S)
      return decodeError(Name, Where + " element " + Twine(Strings.size()) +
                                   " is not a string");
    Strings.push_back(S->str());
  }
  return TensorValue::fromStrings(TName, Shape, std::move(Strings));
}

/// Reads the string spelling of a non-finite float or double ("NaN",
/// "Infinity", "-Infinity") into \p Dest.
static Error decodeNonFinite(StringRef S, ElementType Type, char *Dest,
                             ElementError Bad) {
  if (Type != ElementType::Float && Type != ElementType::Double)
    return Bad("a string for an integer tensor");
  double D;
  if (S == "NaN")
    D = std::numeric_limits<double>::quiet_NaN();
  else if (S == "Infinity")
    D = std::numeric_limits<double>::infinity();
  else if (S == "-Infinity")
    D = -std::numeric_limits<double>::infinity();
  else
    return Bad("string '" + S +
               "' (only \"NaN\", \"Infinity\", \"-Infinity\")");
  if (Type == ElementType::Float) {
    float F = static_cast<float>(D);
    std::memcpy(Dest, &F, 4);
  } else {
    std::memcpy(Dest, &D, 8);
  }
  return Error::success();
}

/// Parses number literal \p Token as a float or double into \p Dest.
static Error decodeFloatLiteral(StringRef Token, ElementType Type, char *Dest,
                                ElementError Bad) {
  bool IsFloat = Type == ElementType::Float;
  // An integer literal is that integer's value, as in the Python decoder:
  // "-0" is the integer 0, so +0.0 (write -0.0 for a negative zero).
  if (Token == "-0")
    Token = "0";
  if (!(IsFloat ? parseFloat<float>(Token, Dest)
                : parseFloat<double>(Token, Dest)))
    return Bad("'" + Token + "' is not a valid number");
  // A number literal is finite: one that overflows the type (1e39 for a
  // float, 1e400 for either) is an error, as in the Python decoder;
  // infinities are written "Infinity" and "-Infinity".
  double D = 0;
  if (IsFloat) {
    float F;
    std::memcpy(&F, Dest, 4);
    D = F;
  } else {
    std::memcpy(&D, Dest, 8);
  }
  if (std::isinf(D))
    return Bad("value " + Token + " is out of range for " +
               elementTypeName(Type));
  return Error::success();
}

/// Parses decimal integer \p Token as integer type \p Type into \p Dest;
/// false if it does not fit.
static bool parseIntegerAs(ElementType Type, StringRef Token, char *Dest) {
  switch (Type) {
  case ElementType::Int8:
    return parseInt<int8_t>(Token, Dest);
  case ElementType::UInt8:
    return parseInt<uint8_t>(Token, Dest);
  case ElementType::Int16:
    return parseInt<int16_t>(Token, Dest);
  case ElementType::UInt16:
    return parseInt<uint16_t>(Token, Dest);
  case ElementType::Int32:
    return parseInt<int32_t>(Token, Dest);
  case ElementType::UInt32:
    return parseInt<uint32_t>(Token, Dest);
  case ElementType::Int64:
    return parseInt<int64_t>(Token, Dest);
  case ElementType::UInt64:
    return parseInt<uint64_t>(Token, Dest);
  default:
    llvm_unreachable("not an integer type");
  }
}

/// Parses number literal \p Token as integer type \p Type into \p Dest.
static Error decodeIntegerLiteral(StringRef Token, ElementType Type, char *Dest,
                                  ElementError Bad) {
  bool IsIntegerLiteral =
      !Token.contains_insensitive('e') && !Token.contains('.');
  if (!IsIntegerLiteral)
    return Bad("'" + Token +
               "' has a fraction or exponent, but the "
               "tensor is " +
               elementTypeName(Type));
  if (!parseIntegerAs(Type, Token, Dest))
    return Bad("'" + Token + "' is out of range for " + elementTypeName(Type));
  return Error::success();
}

/// Reads element \p E of a bool or numeric tensor of \p Type into \p Dest.
/// Numbers are read from their literal text: \p Lits holds the tensor's
/// number literals in array order and \p Lit is the next one's index.
static Error decodeElement(const json::Value &E, ElementType Type,
                           ArrayRef<StringRef> Lits, size_t &Lit, char *Dest,
                           ElementError Bad) {
  if (Type == ElementType::Bool) {
    std::optional<bool> B = E.getAsBoolean();
    if (!B)
      return Bad("not a bool");
    *Dest = *B ? 1 : 0;
    return Error::success();
  }
  if (E.kind() == json::Value::String)
    return decodeNonFinite(*E.getAsString(), Type, Dest, Bad);
  if (E.kind() != json::Value::Number)
    return Bad("not a number");
  if (Lit >= Lits.size())
    return Bad("number literal not found");
  StringRef Token = Lits[Lit++];
  if (Type == ElementType::Float || Type == ElementType::Double)
    return decodeFloatLiteral(Token, Type, Dest, Bad);
  return decodeIntegerLiteral(Token, Type, Dest, Bad);
}

/// Reads the elements of a bool or numeric tensor into \p T, whose number
/// literals are \p Lits.
static Error decodeElements(const json::Array &Data, ArrayRef<StringRef> Lits,
                            const std::string &Where, TensorValue &T) {
  char *Dest = T.mutableBytes().data();
  size_t Size = elementSize(T.type());
  size_t Lit = 0;
  for (size_t I = 0; I < Data.size(); ++I, Dest += Size) {
    auto Bad = [&](const Twine &Why) {
      return decodeError(Name, Where + " element " + Twine(I) + ": " + Why);
    };
    if (Error E = decodeElement(Data[I], T.type(), Lits, Lit, Dest, Bad))
      return E;
  }
  return Error::success();
}

Expected<TensorValue> JSONSerDes::decodeTensor(const json::Value &V,
                                               size_t Index,
                                               const DataLiterals &Literals,
                                               uint64_t Offset) const {
  std::string Where = "tensor " + std::to_string(Index) +
                      " of the message at byte offset " +
                      std::to_string(Offset);
  Expected<const json::Object *> O = tensorObject(V, Where);
  if (!O)
    return O.takeError();
  std::optional<StringRef> TName = (*O)->getString("name");
  if (!TName || TName->empty())
    return decodeError(Name, Where + " has no name");
  Where = "tensor '" + TName->str() + "' (" + Where + ")";
  std::optional<StringRef> TypeName = (*O)->getString("type");
  if (!TypeName)
    return decodeError(Name, Where + " has no type");
  Expected<ElementType> Type = parseElementType(*TypeName);
  if (!Type)
    return decodeError(Name, Where + ": " + toString(Type.takeError()));
  Expected<std::vector<int64_t>> Shape =
      decodeShape(**O, limits().MaxRank, Where);
  if (!Shape)
    return Shape.takeError();
  Expected<uint64_t> Count = checkShape(*Shape, *Type, *TName);
  if (!Count)
    return decodeError(Name, toString(Count.takeError()));
  const json::Array *Data = (*O)->getArray("data");
  if (!Data)
    return decodeError(Name, Where + " has no data array");
  if (Data->size() != *Count)
    return decodeError(Name, Where + " has " + Twine(Data->size()) +
                                 " elements, its shape " + formatShape(*Shape) +
                                 " needs " + Twine(*Count));
  if (*Type == ElementType::String)
    return decodeStrings(*TName, *Shape, *Data, Where);
  Expected<TensorValue> T = TensorValue::create(*TName, *Type, *Shape);
  if (!T)
    return T.takeError();
  if (Error E = decodeElements(*Data, Literals.of(Index), Where, *T))
    return E;
  return T;
}

Expected<std::optional<Record>> JSONSerDes::decode(ByteReader &Reader) {
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
  if (Error E = checkMessageKeys(ML, "tensors", Name, Offset))
    return E;
  const json::Array *Tensors = ML.Object.getArray("tensors");
  if (!Tensors)
    return decodeError(Name, "message at byte offset " + Twine(Offset) +
                                 " has no 'tensors' array");
  if (Tensors->size() > limits().MaxTensors)
    return decodeError(Name, "message at byte offset " + Twine(Offset) +
                                 " has " + Twine(Tensors->size()) +
                                 " tensors, above the limit of " +
                                 Twine(limits().MaxTensors) + " (MaxTensors)");
  DataLiterals Literals(Line);
  Message M;
  M.Kind = ML.Kind;
  M.Id = ML.Id;
  M.Tensors.reserve(Tensors->size());
  for (size_t I = 0; I < Tensors->size(); ++I) {
    Expected<TensorValue> T = decodeTensor((*Tensors)[I], I, Literals, Offset);
    if (!T)
      return T.takeError();
    M.Tensors.push_back(std::move(*T));
  }
  return Record(std::move(M));
}

std::unique_ptr<SerDes> createJSONSerDes(const DecoderLimits &Limits) {
  return std::make_unique<JSONSerDes>(Limits);
}

} // namespace mlbridge
