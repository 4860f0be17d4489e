//===- ModelTool.cpp - Looks models up the way a plugin does --------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The C++ side of the registry for the Python tests (test/python/
// test_models_cross_language.py):
//
//   mlbridge-model-tool find NAME_OR_PATH [--registry DIR] [--repeat N]
//     findModel() (any kind: onnx, tfaot, ir2vec-vocab); prints
//     {"name":..,"kind":..,"path":..,"inputs":[spec..],
//     "outputs":[spec..]} on one line. With --repeat, looks the model up N
//     times (while a test replaces it) and fails on the first error.
//   mlbridge-model-tool fit NAME_OR_PATH --features SPECS.json
//                       [--registry DIR]
//     findModel() then listInputDifferences() against the features in
//     SPECS.json (a list of specs or an object with a "features" list);
//     prints {"differences":[...]} on one line.
//
// Errors go to stderr with exit code 1.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/ModelRegistry.h"
#include "mlbridge/ModelSpecs.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace mlbridge;

static int usage() {
  errs() << "usage: mlbridge-model-tool find NAME_OR_PATH [--registry DIR] "
            "[--repeat N]\n"
            "       mlbridge-model-tool fit NAME_OR_PATH --features SPECS.json "
            "[--registry DIR]\n";
  return 1;
}

static int fail(Error E) {
  errs() << "mlbridge-model-tool: " << toString(std::move(E)) << "\n";
  return 1;
}

static void writeSpecs(ArrayRef<TensorSpec> Specs, std::string &Out) {
  Out += '[';
  for (size_t I = 0; I < Specs.size(); ++I) {
    if (I)
      Out += ',';
    Specs[I].writeJSON(Out);
  }
  Out += ']';
}

static Expected<std::vector<TensorSpec>> readFeatures(StringRef Path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer = MemoryBuffer::getFile(Path);
  if (!Buffer)
    return createStringError(Buffer.getError(),
                             "cannot read " + Path + ": " +
                                 Buffer.getError().message());
  Expected<json::Value> Value = json::parse((*Buffer)->getBuffer());
  if (!Value)
    return Value.takeError();
  const json::Value *List = &*Value;
  if (const json::Object *O = Value->getAsObject())
    if (const json::Value *Features = O->get("features"))
      List = Features;
  const json::Array *A = List->getAsArray();
  if (!A)
    return createStringError(inconvertibleErrorCode(),
                             Path + " is not a list of tensor specs");
  std::vector<TensorSpec> Specs;
  for (const json::Value &V : *A) {
    Expected<TensorSpec> Spec = TensorSpec::fromJSON(V);
    if (!Spec)
      return Spec.takeError();
    Specs.push_back(std::move(*Spec));
  }
  return Specs;
}

int main(int Argc, char **Argv) {
  if (Argc < 3)
    return usage();
  StringRef Command = Argv[1];
  StringRef NameOrPath = Argv[2];
  StringRef Registry, FeaturesPath;
  unsigned Repeat = 1;
  for (int I = 3; I < Argc; ++I) {
    StringRef Arg = Argv[I];
    if (I + 1 >= Argc)
      return usage();
    if (Arg == "--registry")
      Registry = Argv[++I];
    else if (Arg == "--features")
      FeaturesPath = Argv[++I];
    else if (Arg == "--repeat") {
      if (StringRef(Argv[++I]).getAsInteger(10, Repeat) || Repeat == 0)
        return usage();
    } else
      return usage();
  }

  // Every kind the registry keeps, IR2Vec vocabularies included.
  const ModelKind AllKinds[] = {ModelKind::Onnx, ModelKind::TFAOT,
                                ModelKind::Native, ModelKind::IR2VecVocab};
  Expected<RegisteredModel> Model = findModel(NameOrPath, Registry, AllKinds);
  for (unsigned I = 1; Model && I < Repeat; ++I)
    Model = findModel(NameOrPath, Registry, AllKinds);
  if (!Model)
    return fail(Model.takeError());
  std::string Out;
  if (Command == "find") {
    Out += "{\"name\":";
    writeJSONString(Model->Name, Out);
    Out += ",\"kind\":";
    writeJSONString(modelKindName(Model->Kind), Out);
    Out += ",\"path\":";
    writeJSONString(Model->Path, Out);
    Out += ",\"inputs\":";
    writeSpecs(Model->Inputs, Out);
    Out += ",\"outputs\":";
    writeSpecs(Model->Outputs, Out);
    Out += '}';
  } else if (Command == "fit" && !FeaturesPath.empty()) {
    Expected<std::vector<TensorSpec>> Features = readFeatures(FeaturesPath);
    if (!Features)
      return fail(Features.takeError());
    Out += "{\"differences\":[";
    std::vector<std::string> Differences =
        listInputDifferences(*Features, Model->Inputs);
    for (size_t I = 0; I < Differences.size(); ++I) {
      if (I)
        Out += ',';
      writeJSONString(Differences[I], Out);
    }
    Out += "]}";
  } else {
    return usage();
  }
  outs() << Out << "\n";
  return 0;
}
