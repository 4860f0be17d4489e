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
//   mlbridge-serdes-tool decode-batch <bitstream|json|protobuf>
//     reads inputs framed as a 4-byte little-endian length and the bytes,
//     decodes each as a whole stream with a fresh SerDes (every record until
//     the input ends, as Python's decode_stream), and writes one line per
//     input: {"records":[...]} or {"error":"..."} (the differential check
//     test/python/differential.py drives this).
//   mlbridge-serdes-tool --help
//
// Errors go to stderr with exit code 1.
//
//===----------------------------------------------------------------------===//

#include "CaseJSON.h"

#include "mlbridge/SerDes/SerDes.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace mlbridge;

static const char Usage[] =
    "usage: mlbridge-serdes-tool encode|decode|decode-batch "
    "bitstream|json|protobuf < input > output\n"
    "\n"
    "  encode <serdes>        one test-vector case ({\"name\":..,\"records\":"
    "[...]}) on\n"
    "                         stdin, the encoded stream on stdout\n"
    "  decode <serdes>        a stream on stdin, {\"records\":[...]} on "
    "stdout\n"
    "  decode-batch <serdes>  inputs framed as a 4-byte little-endian length "
    "and\n"
    "                         the bytes on stdin; one line per input on "
    "stdout:\n"
    "                         {\"records\":[...]} or {\"error\":\"...\"}\n"
    "  --help, -h             this text\n"
    "\n"
    "Bad input: a message on stderr and exit status 1. docs/serialization.md "
    "defines\nthe formats and the decoder limits.\n";

static int usage() {
  errs() << Usage;
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

/// Decodes every framed input of \p Input with a fresh SerDes of \p Kind.
static Error decodeBatch(SerDesKind Kind, StringRef Input, raw_ostream &OS) {
  while (!Input.empty()) {
    if (Input.size() < 4)
      return createStringError(inconvertibleErrorCode(),
                               "decode-batch: a length prefix is cut short");
    uint32_t Len = support::endian::read32le(Input.data());
    Input = Input.drop_front(4);
    if (Input.size() < Len)
      return createStringError(inconvertibleErrorCode(),
                               "decode-batch: an input is cut short");
    StringRef One = Input.take_front(Len);
    Input = Input.drop_front(Len);
    Expected<std::unique_ptr<SerDes>> S = createSerDes(Kind);
    if (!S)
      return S.takeError();
    MemoryByteReader Reader(One);
    std::vector<Record> Rs;
    Error Failed = Error::success();
    while (true) {
      Expected<std::optional<Record>> R = (*S)->decode(Reader);
      if (!R) {
        Failed = R.takeError();
        break;
      }
      if (!*R)
        break;
      Rs.push_back(std::move(**R));
    }
    if (Failed)
      OS << json::Value(json::Object{{"error", toString(std::move(Failed))}});
    else
      OS << json::Value(json::Object{{"records", recordsToJSON(Rs)}});
    OS << "\n";
  }
  return Error::success();
}

int main(int Argc, char **Argv) {
  for (int I = 1; I < Argc; ++I)
    if (StringRef(Argv[I]) == "--help" || StringRef(Argv[I]) == "-h") {
      outs() << Usage;
      return 0;
    }
  if (Argc != 3)
    return usage();
  StringRef Mode = Argv[1];
  if (Mode != "encode" && Mode != "decode" && Mode != "decode-batch")
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
  if (Mode == "decode-batch") {
    if (Error E = decodeBatch(*Kind, (*In)->getBuffer(), OS))
      return fail(std::move(E));
    outs() << Out;
    outs().flush();
    return 0;
  }
  Error E = Mode == "encode" ? encode(**S, (*In)->getBuffer(), OS)
                             : decode(**S, (*In)->getBuffer(), OS);
  if (E)
    return fail(std::move(E));
  outs() << Out;
  outs().flush();
  return 0;
}
