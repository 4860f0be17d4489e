//===- MLModelRunner.h - Ask a model for a decision ------------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The interface a pass uses: fill features, then evaluate<T>(). Runners
/// (pipes, gRPC, ONNX, AOT, callbacks) derive from MLModelRunner and only
/// implement evaluateUntyped().
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_MLMODELRUNNER_H
#define MLBRIDGE_MLMODELRUNNER_H

#include "mlbridge/Tensor.h"
#include "mlbridge/TensorSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlbridge {

/// Asks a model for advice about a set of features.
///
/// Buffer contract (LLVM's MLGO): the runner owns one buffer per feature
/// spec, created in the constructor. A static feature's buffer keeps its
/// address for the runner's lifetime; a dynamic feature's buffer moves only
/// when it is set with a different element count. evaluate() never resets
/// the buffers, so features a pass does not set keep their last value.
///
/// Thread safety: a runner is used by one thread at a time.
class MLModelRunner {
public:
  virtual ~MLModelRunner();
  MLModelRunner(const MLModelRunner &) = delete;
  MLModelRunner &operator=(const MLModelRunner &) = delete;

  /// The feature specs, in order.
  llvm::ArrayRef<TensorSpec> featureSpecs() const { return Specs; }
  /// The advice spec.
  const TensorSpec &adviceSpec() const { return Advice; }
  /// The index of feature \p Name, if there is one.
  std::optional<size_t> getFeatureIndex(llvm::StringRef Name) const;
  /// The current value of feature \p Index.
  const TensorValue &getFeature(size_t Index) const { return Buffers[Index]; }

  /// Returns a pointer to the buffer of feature \p Index, whose element type
  /// must be \p T (asserted), as LLVM's MLModelRunner::getTensor does.
  template <typename T> T *getTensor(size_t Index) {
    static_assert(!std::is_same_v<T, std::string>,
                  "use getFeature() for string features");
    return Buffers[Index].mutableData<T>().data();
  }
  /// Returns the buffer of feature \p Name as elements of \p T, or an error
  /// naming the feature if it does not exist or has another type.
  template <typename T>
  llvm::Expected<llvm::MutableArrayRef<T>> getTensor(llvm::StringRef Name) {
    llvm::Expected<size_t> I = lookup(Name);
    if (!I)
      return I.takeError();
    return Buffers[*I].getMutableData<T>();
  }

  /// Sets feature \p Name to \p Value: a scalar, a std::vector<T>, an
  /// llvm::ArrayRef<T>, a std::string or a std::vector<std::string>. The
  /// element type must be the spec's exactly; the element count must match
  /// a static shape, and sets the dynamic dimension of a spec that has one.
  template <typename V>
  llvm::Error setFeature(llvm::StringRef Name, const V &Value) {
    return setFeatureImpl(Name, Value);
  }

  /// Sets feature \p Name to \p Data with the concrete shape \p Shape, which
  /// must match the spec (for specs with several dynamic dimensions).
  template <typename T>
  llvm::Error setFeatureWithShape(llvm::StringRef Name,
                                  llvm::ArrayRef<int64_t> Shape,
                                  llvm::ArrayRef<T> Data) {
    if constexpr (std::is_same_v<T, std::string>)
      return setFeatureStrings(Name, Data, Shape);
    else
      return setFeatureRaw(
          Name, elementTypeOf<T>,
          llvm::ArrayRef<char>(reinterpret_cast<const char *>(Data.data()),
                               Data.size() * sizeof(T)),
          Shape);
  }

  /// Sets feature \p Name from raw little-endian elements of \p Type (for
  /// bindings that know types only at run time). \p Shape, if given, is
  /// the concrete shape; otherwise it is worked out as setFeature() does.
  llvm::Error
  setFeatureRaw(llvm::StringRef Name, ElementType Type,
                llvm::ArrayRef<char> Bytes,
                std::optional<llvm::ArrayRef<int64_t>> Shape = std::nullopt);

  /// Sets string feature \p Name to \p Strings (see setFeatureRaw()).
  llvm::Error setFeatureStrings(
      llvm::StringRef Name, llvm::ArrayRef<std::string> Strings,
      std::optional<llvm::ArrayRef<int64_t>> Shape = std::nullopt);

  /// Sets several features, each given as a pair of name and value (see
  /// setFeature()): `populateFeatures(std::pair(StringRef("a"), 1.0f),
  /// std::make_pair("b", Vec))`. Stops at the first error.
  template <typename P, typename... Ps>
  llvm::Error populateFeatures(const P &First, const Ps &...Rest) {
    if (llvm::Error E = setFeature(llvm::StringRef(First.first), First.second))
      return E;
    if constexpr (sizeof...(Rest) == 0)
      return llvm::Error::success();
    else
      return populateFeatures(Rest...);
  }

  /// Tells the model what the following evaluations are about (LLVM's
  /// runners send the function or module name). Runners that have no use for
  /// it ignore it, which is the default; the pipe runner sends a context
  /// record. Passes may call it for every runner.
  virtual llvm::Error switchContext(llvm::StringRef Name);

  /// The spec of the outcome (score, reward) this runner carries back to its
  /// model with sendOutcome(), or none if it cannot carry outcomes. Only a
  /// runner built with a score spec for a training model has one (the pipe
  /// runner); the default has none.
  virtual std::optional<TensorSpec> scoreSpec() const;

  /// Reports the outcome of observation \p ObservationId of the current
  /// context as \p Score, which must match scoreSpec(). The default fails,
  /// naming that this runner cannot carry outcomes.
  virtual llvm::Error sendOutcome(int64_t ObservationId,
                                  const TensorValue &Score);

  /// Replaces the feature and advice specs mid-session (per-request specs,
  /// agents that take turns): the feature buffers are made anew
  /// (zero-filled), and pointers from getTensor() become invalid. The
  /// default fails (std::errc::not_supported): only a runner whose
  /// capabilities() say SpecChanges can.
  virtual llvm::Error changeSpecs(std::vector<TensorSpec> FeatureSpecs,
                                  TensorSpec AdviceSpec);

  /// What a runner can do beyond evaluating, so that a caller can say what
  /// is missing before it tries.
  struct Capabilities {
    /// sendOutcome() works once the runner has a score spec.
    bool Outcomes = false;
    /// changeSpecs() works.
    bool SpecChanges = false;
  };
  /// This runner's capabilities; the default has none.
  virtual Capabilities capabilities() const;

  /// A value the model declares about itself under \p Key (an ONNX model's
  /// metadata_props), such as how far into its inputs it reads; none when
  /// the model does not say or the runner cannot ask it (the default).
  virtual std::optional<std::string> modelMetadata(llvm::StringRef Key) const;

  /// Whether calls can still succeed: false once finish() ran or the
  /// connection to the model broke (every later call fails with the reason).
  /// The default is always usable.
  virtual bool usable() const;

  /// Ends the session (the end of an episode): a runner talking to another
  /// process tells it and lets go of the connection; later evaluations
  /// fail. Idempotent. The default does nothing.
  virtual llvm::Error finish();

  /// Runs the model and returns its advice, checked against the advice spec
  /// (type, shape and constraints: see checkAdviceConstraints()).
  llvm::Expected<TensorValue> evaluateChecked();

  /// Runs the model and returns its advice as \p T: a scalar (the advice
  /// must have one element), std::string, or std::vector of those. The
  /// advice's element type must be \p T's exactly.
  template <typename T> llvm::Expected<T> evaluate() {
    if constexpr (IsVector<T>::value) {
      return evaluateVector<typename T::value_type>();
    } else {
      if constexpr (!std::is_same_v<T, std::string>) {
        // The per-decision hot path: the runner writes the one element
        // straight here, with no TensorValue made.
        T Value;
        llvm::Expected<bool> Done = evaluateScalarChecked(
            elementTypeOf<T>, llvm::MutableArrayRef<char>(
                                  reinterpret_cast<char *>(&Value), sizeof(T)));
        if (!Done)
          return Done.takeError();
        if (*Done)
          return Value;
      }
      llvm::Expected<TensorValue> R = evaluateTyped(elementTypeOf<T>);
      if (!R)
        return R.takeError();
      if (R->getElementCount() != 1)
        return scalarCountError(R->getElementCount());
      return R->template data<T>()[0];
    }
  }

  /// Runs the model and returns all elements of its advice as \p T.
  template <typename T> llvm::Expected<std::vector<T>> evaluateVector() {
    llvm::Expected<TensorValue> R = evaluateTyped(elementTypeOf<T>);
    if (!R)
      return R.takeError();
    llvm::ArrayRef<T> D = R->template data<T>();
    return std::vector<T>(D.begin(), D.end());
  }

protected:
  /// Creates the feature buffers: zero-filled, dynamic dimensions of size 0.
  /// The specs must be valid (see checkSpecs()).
  MLModelRunner(std::vector<TensorSpec> FeatureSpecs, TensorSpec AdviceSpec);

  /// Checks what the constructor needs: unique feature names and buffers of
  /// a reasonable size. Derived classes' factories call it.
  static llvm::Error checkSpecs(llvm::ArrayRef<TensorSpec> FeatureSpecs,
                                const TensorSpec &AdviceSpec);

  /// Replaces the specs (per-request specs) after checking them, and makes
  /// new zero-filled buffers: pointers from getTensor() become invalid.
  llvm::Error replaceSpecs(std::vector<TensorSpec> FeatureSpecs,
                           TensorSpec AdviceSpec);

  /// Runs the model on \p Features (views of the buffers, in spec order).
  virtual llvm::Expected<TensorValue>
  evaluateUntyped(llvm::ArrayRef<TensorRef> Features) = 0;

  /// The scalar evaluate<T>()'s shortcut: runs the model on the features
  /// (featureRefs(), which it reads only when it needs them) and writes its
  /// one-element advice, of the advice spec's type, into \p Out, or returns
  /// false having run nothing, and evaluateUntyped() answers instead. Only
  /// called for a static one-element advice spec; the caller checks the
  /// constraints. The default returns false.
  virtual llvm::Expected<bool>
  evaluateScalarInto(llvm::MutableArrayRef<char> Out);

  /// Views of the feature buffers, in spec order: what evaluateUntyped() is
  /// given. Valid until the next bufferEpoch() change.
  llvm::ArrayRef<TensorRef> featureRefs() const { return Refs; }

  /// Changes whenever a feature buffer may have moved or changed shape (new
  /// specs, a dynamic feature set to another size), and only then: a runner
  /// that handed the buffers' addresses to a model may skip handing them
  /// again while it stays the same. Writing elements does not change it.
  uint64_t bufferEpoch() const { return BufferEpoch; }

private:
  template <typename T> struct IsVector : std::false_type {};
  template <typename T, typename A>
  struct IsVector<std::vector<T, A>> : std::true_type {};

  void makeBuffers();
  llvm::Expected<size_t> lookup(llvm::StringRef Name) const;
  llvm::Expected<TensorValue> evaluateTyped(ElementType Want);
  /// evaluate<T>()'s scalar shortcut (see evaluateScalarInto()): false when
  /// the advice is not one static element of type \p Want or the runner has
  /// no shortcut.
  llvm::Expected<bool> evaluateScalarChecked(ElementType Want,
                                             llvm::MutableArrayRef<char> Out);
  /// Called whenever a buffer may have moved or changed shape: points Refs
  /// at the buffers and advances bufferEpoch().
  void buffersChanged();
  llvm::Error scalarCountError(size_t Count) const;

  template <typename T>
  llvm::Error setArray(llvm::StringRef Name, llvm::ArrayRef<T> Data) {
    if constexpr (std::is_same_v<T, std::string>)
      return setFeatureStrings(Name, Data);
    else
      return setFeatureRaw(
          Name, elementTypeOf<T>,
          llvm::ArrayRef<char>(reinterpret_cast<const char *>(Data.data()),
                               Data.size() * sizeof(T)));
  }

  template <typename T>
  llvm::Error setFeatureImpl(llvm::StringRef Name, const T &Value) {
    static_assert(IsElementType<T>::value,
                  "feature values are int8_t..uint64_t, float, double, bool "
                  "or std::string (exactly)");
    return setArray<T>(Name, llvm::ArrayRef<T>(Value));
  }
  template <typename T>
  llvm::Error setFeatureImpl(llvm::StringRef Name, const std::vector<T> &V) {
    if constexpr (std::is_same_v<T, bool>) {
      // std::vector<bool> is packed; copy to one byte per element.
      std::vector<char> Bytes(V.begin(), V.end());
      return setFeatureRaw(Name, ElementType::Bool, Bytes);
    } else {
      return setArray<T>(Name, V);
    }
  }
  template <typename T>
  llvm::Error setFeatureImpl(llvm::StringRef Name, const llvm::ArrayRef<T> &V) {
    return setArray<T>(Name, V);
  }
  template <size_t N>
  llvm::Error setFeatureImpl(llvm::StringRef Name, const char (&S)[N]) {
    return setFeatureImpl(Name, std::string(S));
  }
  llvm::Error setFeatureImpl(llvm::StringRef Name, const char *const &S) {
    return setFeatureImpl(Name, std::string(S));
  }
  llvm::Error setFeatureImpl(llvm::StringRef Name, const llvm::StringRef &S) {
    return setFeatureImpl(Name, S.str());
  }

  // What every evaluation reads comes first, in the object's first cache line
  // with the vtable pointer: a sweep over many runners finds them cold, and
  // each line costs more than a small model's call.
  std::vector<TensorValue> Buffers;
  uint64_t BufferEpoch = 0;
  /// Whether the advice spec is static with one element (evaluate<T>()'s
  /// shortcut applies), its type and whether it has constraints.
  bool OneElementAdvice = false;
  bool AdviceConstrained = false;
  ElementType OneElementType = ElementType::Float;
  std::vector<TensorSpec> Specs;
  TensorSpec Advice;
  /// Views of Buffers, always current (see buffersChanged()), so that an
  /// evaluation does not rebuild them.
  llvm::SmallVector<TensorRef, 2> Refs;
};

/// Checks \p Advice (of \p Spec's numeric type) against \p Spec's
/// constraints: every element in its range, and (with a mask feature, found
/// by name among \p FeatureSpecs, its value in \p Features) an index of a
/// nonzero mask element. The error names the advice, the element, its value
/// and the range or mask.
llvm::Error checkAdviceConstraints(const TensorSpec &Spec,
                                   const TensorRef &Advice,
                                   llvm::ArrayRef<TensorSpec> FeatureSpecs,
                                   llvm::ArrayRef<TensorValue> Features);
inline llvm::Error
checkAdviceConstraints(const TensorSpec &Spec, const TensorValue &Advice,
                       llvm::ArrayRef<TensorSpec> FeatureSpecs,
                       llvm::ArrayRef<TensorValue> Features) {
  return checkAdviceConstraints(Spec, Advice.ref(), FeatureSpecs, Features);
}

/// A runner that calls a function: for tests and simple in-process policies.
class CallbackModelRunner final : public MLModelRunner {
public:
  /// The policy: features in, advice out.
  using Callback =
      std::function<llvm::Expected<TensorValue>(llvm::ArrayRef<TensorRef>)>;

  /// Creates a runner, checking the specs (see MLModelRunner::checkSpecs()).
  static llvm::Expected<std::unique_ptr<CallbackModelRunner>>
  create(std::vector<TensorSpec> FeatureSpecs, TensorSpec AdviceSpec,
         Callback Policy);

protected:
  llvm::Expected<TensorValue>
  evaluateUntyped(llvm::ArrayRef<TensorRef> Features) override;

private:
  /// Keeps the constructor to create() while allowing std::make_unique.
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

public:
  /// Use create().
  CallbackModelRunner(PrivateTag, std::vector<TensorSpec> FeatureSpecs,
                      TensorSpec AdviceSpec, Callback Policy)
      : MLModelRunner(std::move(FeatureSpecs), std::move(AdviceSpec)),
        Policy(std::move(Policy)) {}

private:
  Callback Policy;
};

} // namespace mlbridge

#endif // MLBRIDGE_MLMODELRUNNER_H
