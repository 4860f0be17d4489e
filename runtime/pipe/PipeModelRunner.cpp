//===- PipeModelRunner.cpp - A model in another process, over FIFOs -------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/PipeModelRunner.h"
#include "mlbridge/SerDes/Bitstream.h"

#include "ChannelTrust.h"
#include "FifoIO.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <thread>
#include <unistd.h>

using namespace llvm;
using namespace mlbridge::pipe_internal;
using std::chrono::milliseconds;

namespace mlbridge {

/// The pipe buffer asked for on `<base>.out`.
static constexpr int PipeBufferBytes = 1 << 20;

//===----------------------------------------------------------------------===//
// PipeModelRunner
//===----------------------------------------------------------------------===//

PipeModelRunner::PipeModelRunner(PrivateTag, std::vector<TensorSpec> Features,
                                 TensorSpec Advice,
                                 PipeModelRunnerOptions Options,
                                 std::unique_ptr<SerDes> Out,
                                 std::unique_ptr<SerDes> In)
    : MLModelRunner(std::move(Features), std::move(Advice)),
      Options(std::move(Options)), Out(std::move(Out)), In(std::move(In)) {
  InPath = this->Options.ChannelBase + ".in";
  OutPath = this->Options.ChannelBase + ".out";
  ExtPath = this->Options.ChannelBase + ".ext";
}

Expected<std::unique_ptr<PipeModelRunner>>
PipeModelRunner::create(std::vector<TensorSpec> Features, TensorSpec Advice,
                        PipeModelRunnerOptions Options) {
  if (Error E = checkSpecs(Features, Advice))
    return E;
  if (Options.ChannelBase.empty())
    return pipeError(std::errc::invalid_argument,
                     "pipe runner: the channel base is empty");
  if (Options.ConnectTimeout.count() <= 0 || Options.Timeout.count() <= 0)
    return pipeError(std::errc::invalid_argument,
                     "pipe runner: timeouts must be positive");
  if (Options.Kind == SerDesKind::Bitstream && Advice.isDynamic())
    return pipeError(std::errc::invalid_argument,
                     "pipe runner: advice '" + Advice.name() +
                         "' has a dynamic shape, which LLVM's raw reply "
                         "cannot carry (use the JSON or protobuf SerDes)");
  Expected<std::unique_ptr<SerDes>> Out =
      createSerDes(Options.Kind, Options.Limits);
  if (!Out)
    return Out.takeError();
  Expected<std::unique_ptr<SerDes>> In =
      createSerDes(Options.Kind, Options.Limits);
  if (!In)
    return In.takeError();
  if (Options.Score && Options.Score->name().empty())
    return pipeError(std::errc::invalid_argument,
                     "pipe runner: the score spec has no name");
  Header H{Features, Advice, Options.Score};
  (*In)->setCurrentHeader(H);
  auto R = std::make_unique<PipeModelRunner>(
      PrivateTag(), std::move(Features), std::move(Advice), std::move(Options),
      std::move(*Out), std::move(*In));
  if (R->Options.CreateFifos)
    if (Error E = R->makeFifos())
      return E;
  return R;
}

PipeModelRunner::~PipeModelRunner() {
  // A failure to send the end record only means the model is gone already.
  consumeError(finish());
  if (OutFD >= 0)
    ::close(OutFD);
  if (InFD >= 0)
    ::close(InFD);
  if (CreatedIn)
    ::unlink(InPath.c_str());
  if (CreatedOut)
    ::unlink(OutPath.c_str());
}

Error PipeModelRunner::makeFifos() {
  for (auto [Path, Created] :
       {std::pair<const std::string *, bool *>(&InPath, &CreatedIn),
        {&OutPath, &CreatedOut}}) {
    if (::mkfifo(Path->c_str(), 0600) == 0) {
      *Created = true;
      // mkfifo() applies the umask; make the mode exactly 0600.
      ::chmod(Path->c_str(), 0600);
      continue;
    }
    if (errno != EEXIST)
      return pipeError(std::errc::io_error, "cannot create FIFO " + *Path +
                                                ": " + std::strerror(errno));
    struct stat St;
    if (::lstat(Path->c_str(), &St) != 0 || !S_ISFIFO(St.st_mode))
      return pipeError(std::errc::file_exists,
                       *Path + " exists and is not a FIFO");
  }
  return Error::success();
}

Error PipeModelRunner::readExtensions() {
  ModelExtensions.clear();
  int FD = ::open(ExtPath.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (FD < 0) {
    if (errno == ENOENT)
      return Error::success(); // a host that only knows LLVM's protocol
    return pipeError(std::errc::io_error,
                     "cannot read " + ExtPath + ": " + std::strerror(errno));
  }
  llvm::scope_exit Close([FD] { ::close(FD); });
  if (Error E = checkChannelFD(FD, ExtPath, /*Regular=*/true))
    return E;
  // A few words; anything longer is not an announcement.
  constexpr size_t Limit = 4096;
  std::string Text(Limit + 1, '\0');
  size_t Got = 0;
  while (Got < Text.size()) {
    ssize_t N = ::read(FD, Text.data() + Got, Text.size() - Got);
    if (N < 0 && errno == EINTR)
      continue;
    if (N < 0)
      return pipeError(std::errc::io_error,
                       "cannot read " + ExtPath + ": " + std::strerror(errno));
    if (N == 0)
      break;
    Got += static_cast<size_t>(N);
  }
  if (Got > Limit)
    return pipeError(std::errc::protocol_error,
                     ExtPath + " is longer than " + Twine(Limit) +
                         " bytes: it is not a list of extensions");
  Text.resize(Got);
  SmallVector<StringRef, 8> Words;
  SplitString(Text, Words);
  for (StringRef W : Words)
    ModelExtensions.push_back(W.str());
  return Error::success();
}

bool PipeModelRunner::modelUnderstands(StringRef Name) const {
  return llvm::is_contained(ModelExtensions, Name);
}

bool PipeModelRunner::sendsEnd() const {
  switch (Options.SendEnd) {
  case PipeEndRecord::Always:
    return true;
  case PipeEndRecord::Never:
    return false;
  case PipeEndRecord::Negotiated:
    break;
  }
  return Options.Kind != SerDesKind::Bitstream ||
         modelUnderstands(PipeExtensionEnd);
}

bool PipeModelRunner::typedReplies() const {
  return Options.Kind == SerDesKind::Bitstream &&
         modelUnderstands(PipeExtensionTypedReply);
}

/// `int64_t [1] 'inlining_decision'`, for errors.
static std::string describeSpec(ElementType Type, ArrayRef<int64_t> Shape,
                                StringRef Name) {
  std::string S = elementTypeName(Type).str() + " [";
  for (size_t I = 0; I < Shape.size(); ++I)
    S += (I ? "," : "") + std::to_string(Shape[I]);
  return S + "] '" + Name.str() + "'";
}

/// The byte size of a static numeric spec's values, for errors.
static std::string describeSize(const TensorSpec &Spec) {
  if (Spec.type() == ElementType::String || Spec.isDynamic())
    return "";
  uint64_t Count = 1;
  for (int64_t D : Spec.shape())
    Count *= static_cast<uint64_t>(D);
  return " is " + std::to_string(Count * elementSize(Spec.type())) + " bytes";
}

Error PipeModelRunner::fail(Error E) {
  if (!E)
    return E;
  std::string Msg = toString(std::move(E));
  Broken = Msg;
  // Closing both ends tells the model the session is over.
  if (OutFD >= 0)
    ::close(OutFD);
  if (InFD >= 0)
    ::close(InFD);
  OutFD = InFD = -1;
  Reader.reset();
  return createStringError(inconvertibleErrorCode(), "pipe runner '%s': %s",
                           Options.ChannelBase.c_str(), Msg.c_str());
}

Error PipeModelRunner::connect() {
  if (!Broken.empty())
    return createStringError(inconvertibleErrorCode(),
                             "pipe runner '%s' failed earlier: %s",
                             Options.ChannelBase.c_str(), Broken.c_str());
  if (Finished)
    return createStringError(inconvertibleErrorCode(),
                             "pipe runner '%s': the session was finished",
                             Options.ChannelBase.c_str());
  if (Reader) {
    if (!HeaderPending)
      return Error::success();
    // changeSpecs(): the new header goes before the next record.
    HeaderPending = false;
    std::string Data;
    if (Error E = Out->encodeHeader(currentHeader(), Data))
      return fail(std::move(E));
    return fail(writeAll(Data, "the new header"));
  }
  Clock::time_point Deadline = Clock::now() + Options.ConnectTimeout;
  // LLVM's order: <base>.in for reading, then <base>.out for writing. The
  // first never waits with O_NONBLOCK; the second fails with ENXIO until the
  // model has opened <base>.out for reading. There is no notification for
  // that, so retry with a growing sleep (1 ms to 50 ms) until the deadline.
  auto Sleep = milliseconds(1);
  auto Wait = [&](const Twine &Failure) -> Error {
    if (Clock::now() >= Deadline)
      return pipeError(std::errc::timed_out,
                       Failure + " within " +
                           formatBound(Options.ConnectTimeout));
    std::this_thread::sleep_for(
        std::min<Clock::duration>(Sleep, Deadline - Clock::now()));
    Sleep = std::min(Sleep * 2, milliseconds(50));
    return Error::success();
  };
  // Nobody but this user may have made or may replace the FIFOs: check the
  // folder first (then the names cannot change under us), each FIFO before
  // opening it, and what was opened.
  if (Error E = checkChannelFolder(Options.ChannelBase))
    return fail(std::move(E));
  while (InFD < 0) {
    struct stat St;
    if (::lstat(InPath.c_str(), &St) == 0) {
      if (Error E = checkChannelStat(St, InPath, /*Regular=*/false))
        return fail(std::move(E));
      InFD = ::open(InPath.c_str(),
                    O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
      if (InFD < 0 && errno != EINTR)
        return fail(pipeError(std::errc::io_error,
                              "cannot open " + InPath +
                                  " for reading: " + std::strerror(errno)));
      if (InFD >= 0)
        if (Error E = checkChannelFD(InFD, InPath))
          return fail(std::move(E));
    } else if (Error E = Wait(InPath + " did not appear")) {
      return fail(std::move(E));
    }
  }
  if (Error E = checkChannelPath(OutPath))
    return fail(std::move(E));
  while (OutFD < 0) {
    OutFD =
        ::open(OutPath.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (OutFD >= 0) {
      if (Error E = checkChannelFD(OutFD, OutPath))
        return fail(std::move(E));
      break;
    }
    if (errno != ENXIO && errno != EINTR)
      return fail(pipeError(std::errc::io_error,
                            "cannot open " + OutPath +
                                " for writing: " + std::strerror(errno)));
    if (Error E = Wait("no model opened " + OutPath + " for reading"))
      return fail(std::move(E));
  }
#ifdef F_SETPIPE_SZ
  // Best effort: with 1 MiB (Linux's default limit for unprivileged users)
  // instead of 64 KiB, a large observation goes in one write, without waking
  // the writer every 64 KiB.
  (void)::fcntl(OutFD, F_SETPIPE_SZ, PipeBufferBytes);
#endif
  // The model opened <base>.out for reading, after writing <base>.ext if it
  // writes one: the announcement is complete now.
  if (Error E = readExtensions())
    return fail(std::move(E));
  Reader = std::make_unique<FdByteReader>(InFD, InPath, Options.Timeout);
  HeaderPending = false;
  std::string Data;
  if (typedReplies()) {
    // The acknowledgement, before anything LLVM's protocol has: the model
    // frames its replies only for a runner that said it reads frames.
    Data = "{\"extensions\":[";
    if (sendsEnd())
      Data += "\"" + std::string(PipeExtensionEnd) + "\",";
    Data += "\"" + std::string(PipeExtensionTypedReply) + "\"]}\n";
  }
  if (Error E = Out->encodeHeader(currentHeader(), Data))
    return fail(std::move(E));
  return fail(writeAll(Data, "the header"));
}

Error PipeModelRunner::writeAll(StringRef Data, const Twine &What) {
  return writeAllV(ArrayRef<StringRef>(Data), What);
}

Error PipeModelRunner::writeAllV(ArrayRef<StringRef> Parts, const Twine &What) {
  SigPipeBlocker Guard;
  // iovecs of what is left; the first may be partly written.
  SmallVector<struct iovec, 8> Vec;
  for (StringRef P : Parts)
    if (!P.empty())
      Vec.push_back({const_cast<char *>(P.data()), P.size()});
  size_t First = 0;
  while (First < Vec.size()) {
    Clock::time_point Deadline = Clock::now() + Options.Timeout;
    ssize_t N;
    int Count = static_cast<int>(std::min<size_t>(Vec.size() - First, IOV_MAX));
    while ((N = ::writev(OutFD, Vec.data() + First, Count)) < 0) {
      if (errno == EPIPE) {
        Guard.raised();
        return pipeError(std::errc::broken_pipe, "the model closed " + OutPath +
                                                     " while " + What +
                                                     " was being written");
      }
      if (errno != EAGAIN && errno != EINTR)
        return pipeError(std::errc::io_error,
                         "writing " + What + " to " + OutPath +
                             " failed: " + std::strerror(errno));
      Expected<short> Ready = pollUntil(OutFD, POLLOUT, Deadline, OutPath);
      if (!Ready)
        return Ready.takeError();
      if (*Ready == 0)
        return pipeError(std::errc::timed_out,
                         "the model did not read " + What + " from " + OutPath +
                             " within " + formatBound(Options.Timeout));
    }
    size_t Done = static_cast<size_t>(N);
    while (First < Vec.size() && Done >= Vec[First].iov_len)
      Done -= Vec[First++].iov_len;
    if (First < Vec.size()) {
      Vec[First].iov_base = static_cast<char *>(Vec[First].iov_base) + Done;
      Vec[First].iov_len -= Done;
    }
  }
  return Error::success();
}

Header PipeModelRunner::currentHeader() const {
  return Header{
      std::vector<TensorSpec>(featureSpecs().begin(), featureSpecs().end()),
      adviceSpec(), Options.Score};
}

Error PipeModelRunner::sendOutcome(int64_t ObservationId,
                                   const TensorValue &Score) {
  if (!Options.Score)
    return pipeError(std::errc::invalid_argument,
                     "pipe runner '" + Options.ChannelBase +
                         "': an outcome needs a score spec in the options");
  const TensorSpec &Spec = *Options.Score;
  if (Score.name() != Spec.name() || Score.type() != Spec.type() ||
      !Spec.matchesConcreteShape(Score.shape()))
    return pipeError(
        std::errc::invalid_argument,
        formatv("pipe runner '{0}': the outcome '{1}' ({2}) does not match "
                "the score spec '{3}' ({4})",
                Options.ChannelBase, Score.name(),
                elementTypeName(Score.type()), Spec.name(),
                elementTypeName(Spec.type()))
            .str());
  if (ObservationId < 0 || ObservationId >= NextId)
    return pipeError(
        std::errc::invalid_argument,
        formatv("pipe runner '{0}': no observation {1} in this context "
                "(observations 0 to {2} were sent)",
                Options.ChannelBase, ObservationId, NextId - 1)
            .str());
  if (Error E = connect())
    return E;
  std::string Data;
  TensorRef Ref = Score.ref();
  if (Error E = Out->encodeMessage(MessageKind::Outcome, ObservationId,
                                   ArrayRef<TensorRef>(Ref), Data))
    return E; // nothing was sent
  return fail(writeAll(
      Data, formatv("the outcome of observation {0}", ObservationId).str()));
}

Error PipeModelRunner::changeSpecs(std::vector<TensorSpec> Features,
                                   TensorSpec Advice) {
  if (Options.Kind == SerDesKind::Bitstream && Advice.isDynamic())
    return pipeError(std::errc::invalid_argument,
                     "pipe runner: advice '" + Advice.name() +
                         "' has a dynamic shape, which LLVM's raw reply "
                         "cannot carry (use the JSON or protobuf SerDes)");
  if (Finished || !Broken.empty())
    return connect(); // the error saying why
  if (Error E = replaceSpecs(std::move(Features), std::move(Advice)))
    return E;
  Header H = currentHeader();
  In->setCurrentHeader(H);
  Out->setCurrentHeader(H);
  HeaderPending = Reader != nullptr;
  return Error::success();
}

Error PipeModelRunner::finish() {
  if (Finished)
    return Error::success();
  // Bytes the model sent after its last reply are wrong advice that nobody
  // read: the session fails rather than ends.
  Error Result =
      Reader && Broken.empty() ? fail(checkNoLeftover()) : Error::success();
  if (!Result && Reader && Broken.empty() && sendsEnd()) {
    std::string Data;
    if (Error E = Out->encodeEnd(Data))
      Result = std::move(E);
    else
      Result = fail(writeAll(Data, "the end record"));
  }
  Finished = true;
  if (OutFD >= 0)
    ::close(OutFD);
  if (InFD >= 0)
    ::close(InFD);
  OutFD = InFD = -1;
  Reader.reset();
  return Result;
}

Error PipeModelRunner::switchContext(StringRef Name) {
  if (Error E = connect())
    return E;
  std::string Data;
  if (Error E = Out->encodeContext(Name, Data))
    return E;
  NextId = 0;
  return fail(writeAll(Data, "the context record"));
}

Expected<TensorValue> PipeModelRunner::readReply(int64_t Id) {
  uint64_t Start = Reader->offset();
  // Formatted only if an error needs it.
  auto What = [Id] {
    return "the advice for observation " + std::to_string(Id);
  };
  auto Closed = [&] {
    return pipeError(std::errc::connection_aborted,
                     "the model closed " + InPath + " before sending " +
                         What());
  };
  if (typedReplies())
    return readTypedReply(Id);
  if (Options.Kind == SerDesKind::Bitstream) {
    // LLVM's reply: exactly the advice tensor's raw bytes, no framing.
    Expected<TensorValue> V = decodeRawTensor(
        adviceSpec(), adviceSpec().shape(), *Reader, Options.Limits);
    if (!V && Reader->atEnd() && Reader->offset() == Start) {
      consumeError(V.takeError());
      return Closed();
    }
    return V;
  }
  Expected<std::optional<Record>> R = In->decode(*Reader);
  if (!R)
    return R.takeError();
  if (!*R)
    return Closed();
  auto *M = std::get_if<Message>(&**R);
  if (!M || M->Kind != MessageKind::Advice)
    return pipeError(std::errc::protocol_error,
                     formatv("{0}: expected {1}, got a record that is not an "
                             "advice message (byte offset {2})",
                             InPath, What(), Start)
                         .str());
  if (M->Id != Id)
    return pipeError(std::errc::protocol_error,
                     formatv("{0}: expected the advice for observation {1}, "
                             "got the advice for observation {2}",
                             InPath, Id, M->Id)
                         .str());
  if (M->Tensors.size() != 1 || M->Tensors[0].name() != adviceSpec().name())
    return pipeError(std::errc::protocol_error,
                     formatv("{0}: the advice for observation {1} must hold "
                             "exactly one tensor named '{2}'",
                             InPath, Id, adviceSpec().name())
                         .str());
  return std::move(M->Tensors[0]);
}

Expected<TensorValue>
PipeModelRunner::evaluateUntyped(ArrayRef<TensorRef> Features) {
  if (Error E = connect())
    return E;
  if (Error E = fail(checkNoLeftover()))
    return E;
  int64_t Id = NextId++;
  // Straight from the feature buffers where the SerDes allows (bitstream):
  // no copy of the values before the kernel's.
  Scratch.clear();
  Pieces.clear();
  if (Error E = Out->encodeMessagePieces(MessageKind::Observation, Id, Features,
                                         Scratch, Pieces))
    return E; // the runner stays usable: nothing was sent
  Parts.clear();
  for (const SerDes::Piece &P : Pieces)
    Parts.push_back(P.External ? StringRef(P.External, P.Size)
                               : StringRef(Scratch).substr(P.Offset, P.Size));
  if (Error E = fail(writeAllV(Parts, "observation " + Twine(Id))))
    return E;
  Expected<TensorValue> V = readReply(Id);
  if (!V)
    return fail(V.takeError());
  LastAnswered = Id;
  // What the model sent with its reply is checked at once; what comes later,
  // before the next observation and at the end.
  if (Error E = fail(checkNoLeftover()))
    return E;
  return V;
}

Error PipeModelRunner::checkNoLeftover() {
  Expected<size_t> Extra = Reader->available();
  if (!Extra)
    return Extra.takeError();
  if (*Extra == 0)
    return Error::success();
  const TensorSpec &Advice = adviceSpec();
  std::string After = LastAnswered
                          ? "after the advice for observation " +
                                std::to_string(*LastAnswered) + " ('" +
                                Advice.name() + "'" + describeSize(Advice) + ")"
                          : "before it was asked for any advice";
  std::string Why =
      Options.Kind == SerDesKind::Bitstream && !typedReplies()
          ? ": a raw reply has no framing, so they would be read as the next "
            "reply (the model sent more than the advice spec "
            "says, or a value of another type)"
          : "";
  return pipeError(std::errc::protocol_error,
                   formatv("{0}: the model sent {1} bytes {2}{3}", InPath,
                           *Extra, After, Why)
                       .str());
}

Expected<TensorValue> PipeModelRunner::readTypedReply(int64_t Id) {
  const TensorSpec &Advice = adviceSpec();
  uint64_t Start = Reader->offset();
  auto NotTyped = [&](const Twine &Why) {
    return pipeError(
        std::errc::protocol_error,
        formatv("{0}: the reply to observation {1} is not a typed reply "
                "(byte offset {2}): {3}; with typed-reply every reply is "
                "{{\"advice\":<id>,\"spec\":<spec>}\\n, the raw values, \\n",
                InPath, Id, Start, Why.str())
            .str());
  };
  // Byte by byte, so that a raw reply (wrong bytes of any kind) is refused
  // at its first byte instead of waiting for a newline that never comes.
  static constexpr StringLiteral Prefix = "{\"advice\":";
  for (char Want : Prefix) {
    char Got;
    if (Error E = Reader->readExact(MutableArrayRef<char>(&Got, 1))) {
      if (Reader->atEnd() && Reader->offset() == Start) {
        consumeError(std::move(E));
        return pipeError(std::errc::connection_aborted,
                         "the model closed " + InPath +
                             " before sending the advice for observation " +
                             Twine(Id));
      }
      return E;
    }
    if (Got != Want)
      return NotTyped(formatv("byte {0} is 0x{1:x-2}, expected '{2}'",
                              Reader->offset() - Start - 1,
                              static_cast<unsigned char>(Got), Want)
                          .str());
  }
  std::string Rest;
  if (Error E = Reader->readLine(Rest, 65536))
    return E;
  std::string Line = (Prefix + Rest).str();
  Expected<json::Value> Parsed = json::parse(Line);
  if (!Parsed)
    return NotTyped("the frame line is not JSON: " +
                    toString(Parsed.takeError()));
  const json::Object *Obj = Parsed->getAsObject();
  std::optional<int64_t> GotId = Obj ? Obj->getInteger("advice") : std::nullopt;
  const json::Value *SpecJSON = Obj ? Obj->get("spec") : nullptr;
  if (!GotId || !SpecJSON || Obj->size() != 2)
    return NotTyped("the frame line must be an object with exactly the keys "
                    "\"advice\" (an integer) and \"spec\"");
  if (*GotId != Id)
    return pipeError(std::errc::protocol_error,
                     formatv("{0}: expected the advice for observation {1}, "
                             "got the advice for observation {2}",
                             InPath, Id, *GotId)
                         .str());
  Expected<TensorSpec> Given = TensorSpec::fromJSON(*SpecJSON);
  if (!Given)
    return NotTyped("its spec is not a tensor spec: " +
                    toString(Given.takeError()));
  if (Given->name() != Advice.name() || Given->type() != Advice.type() ||
      Given->shape() != Advice.shape())
    return pipeError(
        std::errc::protocol_error,
        formatv("{0}: the advice for observation {1} does not match the advice "
                "spec '{2}': expected {3}, got {4}",
                InPath, Id, Advice.name(),
                describeSpec(Advice.type(), Advice.shape(), Advice.name()),
                describeSpec(Given->type(), Given->shape(), Given->name()))
            .str());
  Expected<TensorValue> V =
      decodeRawTensor(Advice, Advice.shape(), *Reader, Options.Limits);
  if (!V)
    return V.takeError();
  char End;
  if (Error E = Reader->readExact(MutableArrayRef<char>(&End, 1)))
    return E;
  if (End != '\n')
    return pipeError(
        std::errc::protocol_error,
        formatv("{0}: the advice for observation {1} ('{2}'{3}) is not "
                "followed by the frame's final newline (byte 0x{4:x-2} at "
                "byte offset {5}): the frame holds more than its spec says",
                InPath, Id, Advice.name(), describeSize(Advice),
                static_cast<unsigned char>(End), Reader->offset() - 1)
            .str());
  return V;
}

} // namespace mlbridge
