//===- main.cpp - An external project running a TF AOT model --------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Usage: mlbridge-external-tfaot ANSWERS.json. Runs the `mixed` test model
// (mlbridge.aot.testmodels) linked in and from its shared object on the first
// case of ANSWERS.json and checks the score against TensorFlow's. Exit 0 if
// both agree.
//
//===----------------------------------------------------------------------===//

#include "extmodel_mlbridge.h"

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

static int run(MLModelRunner &R, const json::Object &In, double Want,
               StringRef How) {
  if (Error E = R.populateFeatures(
          std::make_pair("x", toNumbers<float>(*In.getArray("x"))),
          std::make_pair("count", toNumbers<int64_t>(*In.getArray("count"))),
          std::make_pair("flags", toNumbers<int32_t>(*In.getArray("flags"))))) {
    errs() << toString(std::move(E)) << "\n";
    return 1;
  }
  Expected<float> Score = R.evaluate<float>();
  if (!Score) {
    errs() << toString(Score.takeError()) << "\n";
    return 1;
  }
  bool Same = std::fabs(*Score - Want) <= 1e-5;
  outs() << "mlbridge-external-tfaot: " << How << " score " << *Score
         << (Same ? " matches" : " differs from") << " TensorFlow's " << Want
         << "\n";
  return Same ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    errs() << "usage: mlbridge-external-tfaot ANSWERS.json\n";
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
  const json::Object &Case =
      *(*Doc->getAsObject()->getArray("cases"))[0].getAsObject();
  const json::Object &In = *Case.getObject("inputs");
  double Want =
      *(*Case.getObject("outputs")->getArray("score"))[0].getAsNumber();

  std::vector<TensorSpec> Features = {createSpec<float>("x", {1, 4}),
                                      createSpec<int64_t>("count", {1}),
                                      createSpec<int32_t>("flags", {2})};
  TensorSpec Advice = createSpec<float>("score", {1});
  auto Linked = TFAOTModelRunner::create(mlbridge_aot::extmodel_functions(),
                                         Features, Advice);
  auto Loaded = TFAOTModelRunner::load(EXTMODEL_SO, Features, Advice);
  if (!Linked || !Loaded) {
    errs() << (Linked ? toString(Loaded.takeError())
                      : toString(Linked.takeError()))
           << "\n";
    return 1;
  }
  return run(**Linked, In, Want, "linked") | run(**Loaded, In, Want, "loaded");
}
