//===- CaseJSON.cpp - Test-vector cases as records ------------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "CaseJSON.h"

#include "llvm/ADT/StringExtras.h"

using namespace llvm;

namespace mlbridge {

static Error caseError(const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), "case: " + Msg);
}

static Expected<std::optional<TensorSpec>> optionalSpec(const json::Object &O,
                                                        StringRef Key) {
  const json::Value *V = O.get(Key);
  if (!V || V->kind() == json::Value::Null)
    return std::nullopt;
  Expected<TensorSpec> S = TensorSpec::fromJSON(*V);
  if (!S)
    return S.takeError();
  return std::optional<TensorSpec>(std::move(*S));
}

static Expected<TensorValue> tensorFromJSON(const json::Value &V) {
  const json::Object *O = V.getAsObject();
  if (!O)
    return caseError("tensor is not an object");
  std::optional<StringRef> Name = O->getString("name");
  std::optional<StringRef> TypeName = O->getString("type");
  const json::Array *ShapeA = O->getArray("shape");
  if (!Name || !TypeName || !ShapeA)
    return caseError("tensor needs name, type and shape");
  Expected<ElementType> Type = parseElementType(*TypeName);
  if (!Type)
    return Type.takeError();
  std::vector<int64_t> Shape;
  for (const json::Value &D : *ShapeA) {
    std::optional<int64_t> N = D.getAsInteger();
    if (!N)
      return caseError("tensor '" + *Name + "' has a non-integer dimension");
    Shape.push_back(*N);
  }
  if (*Type == ElementType::String) {
    const json::Array *Strs = O->getArray("strings");
    if (!Strs)
      return caseError("string tensor '" + *Name + "' needs 'strings'");
    std::vector<std::string> Elements;
    for (const json::Value &S : *Strs) {
      std::optional<StringRef> Hex = S.getAsString();
      std::string Bytes;
      if (!Hex || !tryGetFromHex(*Hex, Bytes))
        return caseError("tensor '" + *Name + "' has a string that is not hex");
      Elements.push_back(std::move(Bytes));
    }
    return TensorValue::fromStrings(*Name, Shape, std::move(Elements));
  }
  std::optional<StringRef> Hex = O->getString("raw");
  std::string Bytes;
  if (!Hex || !tryGetFromHex(*Hex, Bytes))
    return caseError("tensor '" + *Name + "' needs hex 'raw'");
  return TensorValue::fromBytes(*Name, *Type, Shape,
                                ArrayRef<char>(Bytes.data(), Bytes.size()));
}

static Expected<Record> recordFromJSON(const json::Value &V) {
  const json::Object *O = V.getAsObject();
  if (!O)
    return caseError("record is not an object");
  if (const json::Object *H = O->getObject("header")) {
    Header Hdr;
    const json::Array *Features = H->getArray("features");
    if (!Features)
      return caseError("header needs 'features'");
    for (const json::Value &F : *Features) {
      Expected<TensorSpec> S = TensorSpec::fromJSON(F);
      if (!S)
        return S.takeError();
      Hdr.Features.push_back(std::move(*S));
    }
    Expected<std::optional<TensorSpec>> Advice = optionalSpec(*H, "advice");
    if (!Advice)
      return Advice.takeError();
    Hdr.Advice = std::move(*Advice);
    Expected<std::optional<TensorSpec>> Score = optionalSpec(*H, "score");
    if (!Score)
      return Score.takeError();
    Hdr.Score = std::move(*Score);
    return Record(std::move(Hdr));
  }
  if (std::optional<StringRef> C = O->getString("context"))
    return Record(Context{C->str()});
  if (const json::Object *M = O->getObject("message")) {
    Message Msg;
    std::optional<StringRef> Kind = M->getString("kind");
    std::optional<MessageKind> K =
        Kind ? parseMessageKind(*Kind) : std::nullopt;
    if (!K)
      return caseError("message needs a kind (observation, outcome, advice)");
    Msg.Kind = *K;
    Msg.Id = M->getInteger("id").value_or(0);
    const json::Array *Tensors = M->getArray("tensors");
    if (!Tensors)
      return caseError("message needs 'tensors'");
    for (const json::Value &T : *Tensors) {
      Expected<TensorValue> TV = tensorFromJSON(T);
      if (!TV)
        return TV.takeError();
      Msg.Tensors.push_back(std::move(*TV));
    }
    return Record(std::move(Msg));
  }
  if (O->get("end"))
    return Record(End{});
  return caseError("unknown record (header, context, message or end)");
}

Expected<std::vector<Record>> recordsFromJSON(const json::Value &Records) {
  const json::Array *A = Records.getAsArray();
  if (!A)
    return caseError("'records' is not an array");
  std::vector<Record> Out;
  for (const json::Value &V : *A) {
    Expected<Record> R = recordFromJSON(V);
    if (!R)
      return R.takeError();
    Out.push_back(std::move(*R));
  }
  return Out;
}

static json::Value specToJSON(const TensorSpec &S) {
  // The spec's own writer is the reference form; reparse it as a value.
  return cantFail(json::parse(S.toJSON()));
}

static json::Value shapeToJSON(ArrayRef<int64_t> Shape) {
  json::Array A;
  for (int64_t D : Shape)
    A.push_back(D);
  return A;
}

json::Array recordsToJSON(ArrayRef<Record> Records) {
  json::Array Out;
  for (const Record &R : Records) {
    if (const auto *H = std::get_if<Header>(&R)) {
      json::Array Features;
      for (const TensorSpec &S : H->Features)
        Features.push_back(specToJSON(S));
      Out.push_back(json::Object{
          {"header",
           json::Object{
               {"features", std::move(Features)},
               {"advice", H->Advice ? specToJSON(*H->Advice) : nullptr},
               {"score", H->Score ? specToJSON(*H->Score) : nullptr}}}});
    } else if (const auto *C = std::get_if<Context>(&R)) {
      Out.push_back(json::Object{{"context", C->Name}});
    } else if (const auto *M = std::get_if<Message>(&R)) {
      json::Array Tensors;
      for (const TensorValue &T : M->Tensors) {
        json::Object TO{{"name", T.name()},
                        {"type", elementTypeName(T.type())},
                        {"shape", shapeToJSON(T.shape())}};
        if (T.type() == ElementType::String) {
          json::Array Strs;
          for (const std::string &S : T.strings())
            Strs.push_back(toHex(S, /*LowerCase=*/true));
          TO["strings"] = std::move(Strs);
        } else {
          TO["raw"] = toHex(StringRef(T.bytes().data(), T.bytes().size()),
                            /*LowerCase=*/true);
        }
        Tensors.push_back(std::move(TO));
      }
      Out.push_back(json::Object{
          {"message", json::Object{{"kind", messageKindName(M->Kind)},
                                   {"id", M->Id},
                                   {"tensors", std::move(Tensors)}}}});
    } else {
      Out.push_back(json::Object{{"end", true}});
    }
  }
  return Out;
}

} // namespace mlbridge
