//===- main.cpp - An external project running a native model --------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Usage: mlbridge-external-native MODEL.json. Runs the dense model of
// make_model.py, compiled to native code by mlbridge_add_native_model(),
// linked in and from its shared object, on every case of MODEL.json, and
// checks each score against the dense layers computed here from the weights
// in MODEL.json. Exit 0 if all agree.
//
//===----------------------------------------------------------------------===//

#include "extnative_mlbridge.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace llvm;
using namespace mlbridge;

template <typename T> static std::vector<T> toNumbers(const json::Array &A) {
  std::vector<T> R;
  for (const json::Value &V : A)
    R.push_back(static_cast<T>(*V.getAsNumber()));
  return R;
}

/// The model's score, computed directly: every feature as float, concatenated,
/// then `act(h * weight + bias)` per layer.
static float directScore(const json::Array &Layers, std::vector<float> H) {
  for (const json::Value &L : Layers) {
    const json::Object &Layer = *L.getAsObject();
    const json::Array &Weight = *Layer.getArray("weight");
    std::vector<float> Bias = toNumbers<float>(*Layer.getArray("bias"));
    std::vector<float> Next = Bias;
    for (size_t I = 0; I < Weight.size(); ++I) {
      std::vector<float> Row = toNumbers<float>(*Weight[I].getAsArray());
      for (size_t J = 0; J < Row.size(); ++J)
        Next[J] += H[I] * Row[J];
    }
    if (*Layer.getString("activation") == "tanh")
      for (float &V : Next)
        V = std::tanh(V);
    H = std::move(Next);
  }
  return H[0];
}

static bool runCase(MLModelRunner &R, const json::Object &In, float Want,
                    StringRef How) {
  if (Error E = R.populateFeatures(
          std::make_pair("x", toNumbers<float>(*In.getArray("x"))),
          std::make_pair("count", toNumbers<int64_t>(*In.getArray("count"))))) {
    errs() << toString(std::move(E)) << "\n";
    return false;
  }
  Expected<float> Score = R.evaluate<float>();
  if (!Score) {
    errs() << toString(Score.takeError()) << "\n";
    return false;
  }
  bool Same = std::fabs(*Score - Want) <= 1e-5f + 1e-5f * std::fabs(Want);
  if (!Same)
    errs() << "mlbridge-external-native: " << How << " score " << *Score
           << " differs from the direct computation's " << Want << "\n";
  return Same;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    errs() << "usage: mlbridge-external-native MODEL.json\n";
    return 2;
  }
  auto Buf = MemoryBuffer::getFile(argv[1]);
  if (!Buf) {
    errs() << "cannot read " << argv[1] << "\n";
    return 2;
  }
  Expected<json::Value> Doc = json::parse((*Buf)->getBuffer());
  if (!Doc) {
    errs() << toString(Doc.takeError()) << "\n";
    return 2;
  }
  const json::Array &Layers = *Doc->getAsObject()->getArray("layers");
  const json::Array &Cases = *Doc->getAsObject()->getArray("cases");

  std::vector<TensorSpec> Features = {createSpec<float>("x", {4}),
                                      createSpec<int64_t>("count", {1})};
  TensorSpec Advice = createSpec<float>("score", {1});
  auto Linked = TFAOTModelRunner::create(mlbridge_aot::extnative_functions(),
                                         Features, Advice);
  auto Loaded = TFAOTModelRunner::load(EXTNATIVE_SO, Features, Advice);
  if (!Linked || !Loaded) {
    errs() << (Linked ? toString(Loaded.takeError())
                      : toString(Linked.takeError()))
           << "\n";
    return 1;
  }
  unsigned Agreed = 0;
  for (const json::Value &C : Cases) {
    const json::Object &In = *C.getAsObject();
    std::vector<float> Row = toNumbers<float>(*In.getArray("x"));
    Row.push_back(
        static_cast<float>(*(*In.getArray("count"))[0].getAsNumber()));
    float Want = directScore(Layers, Row);
    Agreed += runCase(**Linked, In, Want, "linked") &&
              runCase(**Loaded, In, Want, "loaded");
  }
  outs() << "mlbridge-external-native: " << Agreed << " of " << Cases.size()
         << " scores, linked in and loaded, match the direct computation\n";
  return Agreed == Cases.size() && !Cases.empty() ? 0 : 1;
}
