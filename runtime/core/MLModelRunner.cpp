//===- MLModelRunner.cpp - Ask a model for a decision ---------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/MLModelRunner.h"

#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstdio>
#include <cstring>

using namespace llvm;

namespace mlbridge {

// Feature buffers are allocated up front; larger ones are almost certainly a
// spec error rather than a real feature.
static constexpr uint64_t MaxFeatureBytes = uint64_t(1) << 32;

MLModelRunner::~MLModelRunner() = default;

namespace {
/// One element of a numeric tensor, kept exactly: as a signed or unsigned
/// 64-bit integer or a double.
struct Number {
  enum { Signed, Unsigned, Floating } Kind;
  int64_t I = 0;
  uint64_t U = 0;
  double D = 0;

  std::string str() const {
    switch (Kind) {
    case Signed:
      return std::to_string(I);
    case Unsigned:
      return std::to_string(U);
    case Floating:
      break;
    }
    char Buf[32];
    std::snprintf(Buf, sizeof(Buf), "%.17g", D);
    return Buf;
  }
};
} // namespace

/// Element \p Index of \p Bytes, whose element type is the numeric \p Type.
static Number readNumber(ElementType Type, ArrayRef<char> Bytes, size_t Index) {
  auto Read = [&](auto Zero) {
    decltype(Zero) V;
    std::memcpy(&V, Bytes.data() + Index * sizeof(V), sizeof(V));
    return V;
  };
  Number N{Number::Signed};
  switch (Type) {
  case ElementType::Int8:
    N.I = Read(int8_t());
    break;
  case ElementType::Int16:
    N.I = Read(int16_t());
    break;
  case ElementType::Int32:
    N.I = Read(int32_t());
    break;
  case ElementType::Int64:
    N.I = Read(int64_t());
    break;
  case ElementType::Bool:
    N.I = Read(uint8_t()) != 0;
    break;
  case ElementType::UInt8:
    N = {Number::Unsigned, 0, Read(uint8_t())};
    break;
  case ElementType::UInt16:
    N = {Number::Unsigned, 0, Read(uint16_t())};
    break;
  case ElementType::UInt32:
    N = {Number::Unsigned, 0, Read(uint32_t())};
    break;
  case ElementType::UInt64:
    N = {Number::Unsigned, 0, Read(uint64_t())};
    break;
  case ElementType::Float:
    N = {Number::Floating, 0, 0, Read(float())};
    break;
  case ElementType::Double:
    N = {Number::Floating, 0, 0, Read(double())};
    break;
  case ElementType::String:
    llvm_unreachable("strings are not numbers");
  }
  return N;
}

/// Whether \p N < \p Bound, exactly (NaN is not).
static bool lessThan(const Number &N, int64_t Bound) {
  switch (N.Kind) {
  case Number::Signed:
    return N.I < Bound;
  case Number::Unsigned:
    return Bound > 0 && N.U < static_cast<uint64_t>(Bound);
  case Number::Floating:
    break;
  }
  // For an integer bound, D < Bound iff floor(D) < Bound; 2^63 is exact.
  if (std::isnan(N.D) || N.D >= 0x1p63)
    return false;
  if (N.D < -0x1p63)
    return true;
  return static_cast<int64_t>(std::floor(N.D)) < Bound;
}

/// Whether \p N is in [Range.Low, Range.High) (NaN is not).
static bool inRange(const Number &N, const ValueRange &Range) {
  if (N.Kind == Number::Floating && std::isnan(N.D))
    return false;
  return !lessThan(N, Range.Low) && lessThan(N, Range.High);
}

Error checkAdviceConstraints(const TensorSpec &Spec, const TensorRef &Advice,
                             ArrayRef<TensorSpec> FeatureSpecs,
                             ArrayRef<TensorValue> Features) {
  if (!Spec.hasConstraints())
    return Error::success();
  const TensorValue *Mask = nullptr;
  if (!Spec.maskFeature().empty()) {
    auto It = find_if(FeatureSpecs, [&](const TensorSpec &S) {
      return S.name() == Spec.maskFeature();
    });
    if (It == FeatureSpecs.end() || It->type() == ElementType::String)
      return createStringError(
          inconvertibleErrorCode(),
          "advice '%s' is masked by feature '%s', which is not a numeric "
          "feature of the model",
          Spec.name().c_str(), Spec.maskFeature().c_str());
    Mask = &Features[It - FeatureSpecs.begin()];
  }
  const std::optional<ValueRange> &Range = Spec.validRange();
  for (size_t I = 0, E = Advice.getElementCount(); I < E; ++I) {
    Number N = readNumber(Advice.type(), Advice.bytes(), I);
    if (Range && !inRange(N, *Range))
      return createStringError(
          inconvertibleErrorCode(),
          "advice '%s' element %zu is %s, outside its range [%lld, %lld)",
          Spec.name().c_str(), I, N.str().c_str(),
          static_cast<long long>(Range->Low),
          static_cast<long long>(Range->High));
    if (!Mask)
      continue;
    // withConstraints() allows a mask only on integer advice.
    size_t Entries = Mask->getElementCount();
    bool IsIndex = N.Kind == Number::Signed
                       ? N.I >= 0 && static_cast<uint64_t>(N.I) < Entries
                       : N.U < Entries;
    if (!IsIndex)
      return createStringError(
          inconvertibleErrorCode(),
          "advice '%s' element %zu is %s, which is not an index of its mask "
          "feature '%s' (%zu entries)",
          Spec.name().c_str(), I, N.str().c_str(), Spec.maskFeature().c_str(),
          Entries);
    size_t Index = N.Kind == Number::Signed ? static_cast<size_t>(N.I)
                                            : static_cast<size_t>(N.U);
    Number Entry = readNumber(Mask->type(), Mask->bytes(), Index);
    bool Zero = Entry.Kind == Number::Signed     ? Entry.I == 0
                : Entry.Kind == Number::Unsigned ? Entry.U == 0
                                                 : Entry.D == 0;
    if (Zero)
      return createStringError(
          inconvertibleErrorCode(),
          "advice '%s' element %zu is %s, whose entry in its mask feature "
          "'%s' is 0 (not allowed)",
          Spec.name().c_str(), I, N.str().c_str(), Spec.maskFeature().c_str());
  }
  return Error::success();
}

Error MLModelRunner::switchContext(StringRef) { return Error::success(); }

std::optional<TensorSpec> MLModelRunner::scoreSpec() const {
  return std::nullopt;
}

Error MLModelRunner::sendOutcome(int64_t, const TensorValue &Score) {
  return createStringError(std::make_error_code(std::errc::not_supported),
                           "this runner cannot carry outcomes (the score '" +
                               Twine(Score.name()) +
                               "' has nowhere to go): only a pipe runner "
                               "made with a score spec can");
}

Error MLModelRunner::changeSpecs(std::vector<TensorSpec>, TensorSpec) {
  return createStringError(std::make_error_code(std::errc::not_supported),
                           "this runner cannot change its specs mid-session: "
                           "only a pipe runner can");
}

MLModelRunner::Capabilities MLModelRunner::capabilities() const { return {}; }

std::optional<std::string> MLModelRunner::modelMetadata(StringRef) const {
  return std::nullopt;
}

bool MLModelRunner::usable() const { return true; }

Error MLModelRunner::finish() { return Error::success(); }

Error MLModelRunner::checkSpecs(ArrayRef<TensorSpec> FeatureSpecs,
                                const TensorSpec &AdviceSpec) {
  StringSet<> Seen;
  for (const TensorSpec &S : FeatureSpecs) {
    if (!Seen.insert(S.name()).second)
      return createStringError(inconvertibleErrorCode(),
                               "feature '%s' is listed twice",
                               S.name().c_str());
    std::vector<int64_t> Initial(S.shape().begin(), S.shape().end());
    for (int64_t &D : Initial)
      if (D == DynamicDim)
        D = 0;
    std::optional<uint64_t> Count = shapeElementCount(Initial);
    uint64_t Size = S.type() == ElementType::String ? sizeof(std::string)
                                                    : elementSize(S.type());
    if (!Count || *Count > MaxFeatureBytes / Size)
      return createStringError(
          inconvertibleErrorCode(),
          "feature '%s' needs a buffer above %llu bytes", S.name().c_str(),
          static_cast<unsigned long long>(MaxFeatureBytes));
  }
  (void)AdviceSpec;
  return Error::success();
}

MLModelRunner::MLModelRunner(std::vector<TensorSpec> FeatureSpecs,
                             TensorSpec AdviceSpec)
    : Specs(std::move(FeatureSpecs)), Advice(std::move(AdviceSpec)) {
  assert(!checkSpecs(Specs, Advice) && "invalid runner specs");
  makeBuffers();
}

void MLModelRunner::makeBuffers() {
  Buffers.clear();
  OneElementAdvice = !Advice.isDynamic() && Advice.getElementCount() == 1;
  OneElementType = Advice.type();
  AdviceConstrained = Advice.hasConstraints();
  Buffers.reserve(Specs.size());
  for (const TensorSpec &S : Specs) {
    std::vector<int64_t> Shape(S.shape().begin(), S.shape().end());
    for (int64_t &D : Shape)
      if (D == DynamicDim)
        D = 0;
    Buffers.push_back(cantFail(TensorValue::create(S.name(), S.type(), Shape)));
  }
  buffersChanged();
}

Error MLModelRunner::replaceSpecs(std::vector<TensorSpec> FeatureSpecs,
                                  TensorSpec AdviceSpec) {
  if (Error E = checkSpecs(FeatureSpecs, AdviceSpec))
    return E;
  Specs = std::move(FeatureSpecs);
  Advice = std::move(AdviceSpec);
  makeBuffers();
  return Error::success();
}

std::optional<size_t> MLModelRunner::getFeatureIndex(StringRef Name) const {
  for (size_t I = 0; I < Specs.size(); ++I)
    if (Specs[I].name() == Name)
      return I;
  return std::nullopt;
}

Expected<size_t> MLModelRunner::lookup(StringRef Name) const {
  if (std::optional<size_t> I = getFeatureIndex(Name))
    return *I;
  return createStringError(inconvertibleErrorCode(), "unknown feature '%s'",
                           Name.str().c_str());
}

/// Works out the concrete shape for \p Count elements of \p Spec: a static
/// shape must have that many; one dynamic dimension takes what is left.
static Expected<std::vector<int64_t>> shapeFor(const TensorSpec &Spec,
                                               size_t Count) {
  std::vector<int64_t> Shape(Spec.shape().begin(), Spec.shape().end());
  size_t NumDynamic = llvm::count(Shape, DynamicDim);
  uint64_t StaticCount = 1;
  for (int64_t D : Shape)
    if (D != DynamicDim)
      StaticCount *= static_cast<uint64_t>(D);
  if (NumDynamic == 0) {
    if (StaticCount != Count)
      return createStringError(
          inconvertibleErrorCode(), "feature '%s' has %llu elements, given %zu",
          Spec.name().c_str(), static_cast<unsigned long long>(StaticCount),
          Count);
    return Shape;
  }
  if (NumDynamic > 1)
    return createStringError(inconvertibleErrorCode(),
                             "feature '%s' has %zu dynamic dimensions; use "
                             "setFeatureWithShape()",
                             Spec.name().c_str(), NumDynamic);
  if (StaticCount == 0 ? Count != 0 : Count % StaticCount != 0)
    return createStringError(inconvertibleErrorCode(),
                             "feature '%s': %zu elements do not fill shape %s",
                             Spec.name().c_str(), Count, Spec.toJSON().c_str());
  for (int64_t &D : Shape)
    if (D == DynamicDim)
      D = StaticCount == 0 ? 0 : static_cast<int64_t>(Count / StaticCount);
  return Shape;
}

Error MLModelRunner::setFeatureRaw(StringRef Name, ElementType Type,
                                   ArrayRef<char> Bytes,
                                   std::optional<ArrayRef<int64_t>> Shape) {
  Expected<size_t> I = lookup(Name);
  if (!I)
    return I.takeError();
  const TensorSpec &Spec = Specs[*I];
  if (Spec.type() != Type)
    return createStringError(
        inconvertibleErrorCode(), "feature '%s' is %s, given %s",
        Spec.name().c_str(), elementTypeName(Spec.type()).data(),
        elementTypeName(Type).data());
  if (Type == ElementType::String)
    return createStringError(inconvertibleErrorCode(),
                             "feature '%s': strings need setFeatureStrings()",
                             Spec.name().c_str());
  size_t Count = Bytes.size() / elementSize(Type);
  if (Count * elementSize(Type) != Bytes.size())
    return createStringError(inconvertibleErrorCode(),
                             "feature '%s': %zu bytes is not a whole number "
                             "of %s elements",
                             Spec.name().c_str(), Bytes.size(),
                             elementTypeName(Type).data());
  std::vector<int64_t> Concrete;
  if (Shape) {
    if (!Spec.matchesConcreteShape(*Shape) ||
        shapeElementCount(*Shape) != std::optional<uint64_t>(Count))
      return createStringError(inconvertibleErrorCode(),
                               "feature '%s': shape and %zu elements do not "
                               "match spec %s",
                               Spec.name().c_str(), Count,
                               Spec.toJSON().c_str());
    Concrete.assign(Shape->begin(), Shape->end());
  } else {
    Expected<std::vector<int64_t>> S = shapeFor(Spec, Count);
    if (!S)
      return S.takeError();
    Concrete = std::move(*S);
  }
  if (Type == ElementType::Bool)
    for (size_t J = 0; J < Bytes.size(); ++J)
      if (Bytes[J] != 0 && Bytes[J] != 1)
        return createStringError(inconvertibleErrorCode(),
                                 "feature '%s': bool element %zu is not 0 or 1",
                                 Spec.name().c_str(), J);
  TensorValue &Buf = Buffers[*I];
  if (Buf.shape() != ArrayRef<int64_t>(Concrete)) {
    if (Error E = Buf.reshape(Concrete))
      return E;
    buffersChanged();
  }
  if (!Bytes.empty())
    std::memcpy(Buf.mutableBytes().data(), Bytes.data(), Bytes.size());
  return Error::success();
}

Error MLModelRunner::setFeatureStrings(StringRef Name,
                                       ArrayRef<std::string> Strings,
                                       std::optional<ArrayRef<int64_t>> Shape) {
  Expected<size_t> I = lookup(Name);
  if (!I)
    return I.takeError();
  const TensorSpec &Spec = Specs[*I];
  if (Spec.type() != ElementType::String)
    return createStringError(
        inconvertibleErrorCode(), "feature '%s' is %s, given string",
        Spec.name().c_str(), elementTypeName(Spec.type()).data());
  std::vector<int64_t> Concrete;
  if (Shape) {
    if (!Spec.matchesConcreteShape(*Shape) ||
        shapeElementCount(*Shape) != std::optional<uint64_t>(Strings.size()))
      return createStringError(inconvertibleErrorCode(),
                               "feature '%s': shape and %zu strings do not "
                               "match spec %s",
                               Spec.name().c_str(), Strings.size(),
                               Spec.toJSON().c_str());
    Concrete.assign(Shape->begin(), Shape->end());
  } else {
    Expected<std::vector<int64_t>> S = shapeFor(Spec, Strings.size());
    if (!S)
      return S.takeError();
    Concrete = std::move(*S);
  }
  TensorValue &Buf = Buffers[*I];
  if (Buf.shape() != ArrayRef<int64_t>(Concrete)) {
    if (Error E = Buf.reshape(Concrete))
      return E;
    buffersChanged();
  }
  llvm::copy(Strings, Buf.mutableStrings().begin());
  return Error::success();
}

void MLModelRunner::buffersChanged() {
  Refs.clear();
  for (const TensorValue &V : Buffers)
    Refs.push_back(V.ref());
  ++BufferEpoch;
}

Expected<bool> MLModelRunner::evaluateScalarInto(MutableArrayRef<char>) {
  return false;
}

Expected<bool> MLModelRunner::evaluateScalarChecked(ElementType Want,
                                                    MutableArrayRef<char> Out) {
  if (!OneElementAdvice || Want != OneElementType)
    return false; // evaluateTyped() says what is wrong, or answers
  Expected<bool> Done = evaluateScalarInto(Out);
  if (!Done || !*Done)
    return Done;
  if (AdviceConstrained) {
    ArrayRef<int64_t> Shape = Advice.shape();
    if (Error E = checkAdviceConstraints(
            Advice,
            TensorRef(Advice.name(), Advice.type(), Shape,
                      ArrayRef<char>(Out.data(), Out.size())),
            Specs, Buffers))
      return E;
  }
  return true;
}

Expected<TensorValue> MLModelRunner::evaluateChecked() {
  Expected<TensorValue> R = evaluateUntyped(Refs);
  if (!R)
    return R.takeError();
  if (R->type() != Advice.type())
    return createStringError(inconvertibleErrorCode(),
                             "model replied %s for advice '%s', which is %s",
                             elementTypeName(R->type()).data(),
                             Advice.name().c_str(),
                             elementTypeName(Advice.type()).data());
  if (!Advice.matchesConcreteShape(R->shape())) {
    std::string Shape;
    writeShapeJSON(R->shape(), Shape);
    return createStringError(inconvertibleErrorCode(),
                             "model replied shape %s for advice '%s', spec %s",
                             Shape.c_str(), Advice.name().c_str(),
                             Advice.toJSON().c_str());
  }
  // Before any pass sees the value: an index outside its range or mask makes
  // stock LLVM's advisors crash or emit wrong code.
  if (Error E = checkAdviceConstraints(Advice, *R, Specs, Buffers))
    return E;
  return R;
}

Expected<TensorValue> MLModelRunner::evaluateTyped(ElementType Want) {
  if (Want != Advice.type())
    return createStringError(
        inconvertibleErrorCode(), "advice '%s' is %s, evaluate asked for %s",
        Advice.name().c_str(), elementTypeName(Advice.type()).data(),
        elementTypeName(Want).data());
  return evaluateChecked();
}

Error MLModelRunner::scalarCountError(size_t Count) const {
  return createStringError(inconvertibleErrorCode(),
                           "advice '%s' has %zu elements; evaluate<T>() of a "
                           "scalar needs exactly 1 (use evaluateVector<T>())",
                           Advice.name().c_str(), Count);
}

Expected<std::unique_ptr<CallbackModelRunner>>
CallbackModelRunner::create(std::vector<TensorSpec> FeatureSpecs,
                            TensorSpec AdviceSpec, Callback Policy) {
  if (Error E = checkSpecs(FeatureSpecs, AdviceSpec))
    return E;
  if (!Policy)
    return createStringError(inconvertibleErrorCode(),
                             "callback runner needs a callback");
  return std::make_unique<CallbackModelRunner>(
      PrivateTag(), std::move(FeatureSpecs), std::move(AdviceSpec),
      std::move(Policy));
}

Expected<TensorValue>
CallbackModelRunner::evaluateUntyped(ArrayRef<TensorRef> Features) {
  return Policy(Features);
}

} // namespace mlbridge
