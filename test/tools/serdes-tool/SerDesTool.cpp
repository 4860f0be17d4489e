//===- SerDesTool.cpp - Encode and decode test-vector cases ---------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
//   mlbridge-serdes-tool encode <bitstream|json|protobuf>
//     reads one case ({"name":..,"records":[...]}) on stdin and writes the
//     encoded stream on stdout.
//   mlbridge-serdes-tool decode <bitstream|json|protobuf>
//     reads a stream on stdin and writes {"records":[...]} on stdout.
//
// Errors go to stderr with exit code 1.
//
//===----------------------------------------------------------------------===//

#include "CaseJSON.h"

#include "mlbridge/SerDes/SerDes.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace mlbridge;

static int usage() {
  errs() << "usage: mlbridge-serdes-tool encode|decode "
            "bitstream|json|protobuf < input > output\n";
  return 1;
}

static int fail(Error E) {
  errs() << "mlbridge-serdes-tool: " << toString(std::move(E)) << "\n";
  return 1;
}

static Error encode(SerDes &S, StringRef Input, raw_ostream &OS) {
  Expected<json::Value> Case = json::parse(Input);
  if (!Case)
    return Case.takeError();
  const json::Object *O = Case->getAsObject();
  const json::Value *Records = O ? O->get("records") : nullptr;
  if (!Records)
    return createStringError(inconvertibleErrorCode(),
                             "input is not a case object with 'records'");
  Expected<std::vector<Record>> Rs = recordsFromJSON(*Records);
  if (!Rs)
    return Rs.takeError();
  std::string Out;
  for (const Record &R : *Rs)
    if (Error E = S.encode(R, Out))
      return E;
  OS << Out;
  return Error::success();
}

static Error decode(SerDes &S, StringRef Input, raw_ostream &OS) {
  MemoryByteReader Reader(Input);
  Expected<std::vector<Record>> Rs = decodeAll(S, Reader);
  if (!Rs)
    return Rs.takeError();
  if (!Reader.atEnd())
    return createStringError(inconvertibleErrorCode(),
                             "%zu bytes after the end record",
                             Reader.remaining().size());
  OS << json::Value(json::Object{{"records", recordsToJSON(*Rs)}}) << "\n";
  return Error::success();
}

int main(int Argc, char **Argv) {
  if (Argc != 3)
    return usage();
  StringRef Mode = Argv[1];
  if (Mode != "encode" && Mode != "decode")
    return usage();
  Expected<SerDesKind> Kind = parseSerDesKind(Argv[2]);
  if (!Kind)
    return fail(Kind.takeError());
  Expected<std::unique_ptr<SerDes>> S = createSerDes(*Kind);
  if (!S)
    return fail(S.takeError());
  ErrorOr<std::unique_ptr<MemoryBuffer>> In = MemoryBuffer::getSTDIN();
  if (!In)
    return fail(errorCodeToError(In.getError()));
  std::string Out;
  raw_string_ostream OS(Out);
  Error E = Mode == "encode" ? encode(**S, (*In)->getBuffer(), OS)
                             : decode(**S, (*In)->getBuffer(), OS);
  if (E)
    return fail(std::move(E));
  outs() << Out;
  outs().flush();
  return 0;
}
