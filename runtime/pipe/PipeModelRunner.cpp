//===- PipeModelRunner.cpp - A model in another process, over FIFOs -------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/PipeModelRunner.h"
#include "mlbridge/ModelRegistry.h"
#include "mlbridge/SerDes/Bitstream.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <thread>
#include <unistd.h>

using namespace llvm;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace mlbridge {

namespace {

/// The pipe buffer asked for on `<base>.out`.
constexpr int PipeBufferBytes = 1 << 20;

Error pipeError(std::errc Code, const Twine &Msg) {
  return createStringError(std::make_error_code(Code), Msg);
}

std::string formatBound(milliseconds Bound) {
  return formatv("{0} ms", Bound.count()).str();
}

/// Milliseconds left until \p Deadline, for poll(): at least 1 while time
/// remains, 0 once it has passed.
int remainingMs(Clock::time_point Deadline) {
  auto Left = std::chrono::duration_cast<milliseconds>(Deadline - Clock::now());
  if (Left.count() <= 0)
    return Clock::now() >= Deadline ? 0 : 1;
  return static_cast<int>(std::min<int64_t>(Left.count() + 1, INT32_MAX));
}

/// Waits for \p Events on \p FD until \p Deadline. Returns the revents, or 0
/// on timeout.
Expected<short> pollUntil(int FD, short Events, Clock::time_point Deadline,
                          StringRef Path) {
  while (true) {
    int Ms = remainingMs(Deadline);
    if (Ms == 0)
      return 0;
    struct pollfd P = {FD, Events, 0};
    int R = ::poll(&P, 1, Ms);
    if (R > 0)
      return P.revents;
    if (R < 0 && errno != EINTR)
      return pipeError(std::errc::io_error,
                       "poll on " + Path + " failed: " + std::strerror(errno));
  }
}

/// Blocks SIGPIPE on this thread for its lifetime, then restores the mask. A
/// write to a FIFO without reader fails with EPIPE and raises SIGPIPE: call
/// raised() then, and the signal is discarded (unless one was pending before).
/// Two system calls on the usual path (block, restore): with SIGPIPE not
/// blocked before, none can have been pending, since the kernel delivers an
/// unblocked signal before returning to the thread.
class SigPipeBlocker {
public:
  SigPipeBlocker() {
    sigemptyset(&Set);
    sigaddset(&Set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &Set, &Old);
    WasBlocked = sigismember(&Old, SIGPIPE) == 1;
    if (WasBlocked) {
      sigset_t Pending;
      sigemptyset(&Pending);
      sigpending(&Pending);
      WasPending = sigismember(&Pending, SIGPIPE) == 1;
    }
  }
  ~SigPipeBlocker() {
    if (Raised && !WasPending) {
      sigset_t Pending;
      sigemptyset(&Pending);
      if (sigpending(&Pending) == 0 && sigismember(&Pending, SIGPIPE) == 1) {
        struct timespec Zero = {0, 0};
        while (sigtimedwait(&Set, nullptr, &Zero) < 0 && errno == EINTR) {
        }
      }
    }
    if (!WasBlocked)
      pthread_sigmask(SIG_SETMASK, &Old, nullptr);
  }
  SigPipeBlocker(const SigPipeBlocker &) = delete;
  SigPipeBlocker &operator=(const SigPipeBlocker &) = delete;

  /// A write failed with EPIPE: discard the SIGPIPE it raised.
  void raised() { Raised = true; }

private:
  sigset_t Set, Old;
  bool WasBlocked = false;
  bool WasPending = false;
  bool Raised = false;
};

std::string modeText(mode_t M) {
  char Buf[16];
  std::snprintf(Buf, sizeof(Buf), "%04o", static_cast<unsigned>(M & 07777));
  return Buf;
}

/// The fix every trust error names.
constexpr const char *PrivateFolderFix =
    "make the channel in a private folder of the compiler's user (mkdir -m "
    "700 DIR, then DIR/channel; mlbridge.compiler.pipe.FifoChannel() makes "
    "one)";

/// Checks the status \p St of channel file \p Path (a FIFO, or the
/// `<base>.ext` regular file if \p Regular): it belongs to this process's
/// user and neither the group nor others may write it.
Error checkChannelStat(const struct stat &St, const std::string &Path,
                       bool Regular) {
  if (Regular ? !S_ISREG(St.st_mode) : !S_ISFIFO(St.st_mode))
    return pipeError(
        std::errc::invalid_argument,
        Path + (Regular ? " is not a regular file" : " is not a FIFO"));
  uid_t Me = ::geteuid();
  if (St.st_uid != Me)
    return pipeError(std::errc::permission_denied,
                     "refusing " + Path + ": it belongs to user " +
                         describeUser(St.st_uid) + ", not to " +
                         describeUser(Me) +
                         " who runs this compiler, so another user could "
                         "answer in the model's place; " +
                         PrivateFolderFix);
  if (St.st_mode & (S_IWGRP | S_IWOTH))
    return pipeError(std::errc::permission_denied,
                     "refusing " + Path +
                         ": its group or others may write it (mode " +
                         modeText(St.st_mode) + "); fix: chmod 600 " + Path +
                         ", or " + PrivateFolderFix);
  return Error::success();
}

/// Checks channel file \p Path without following a link at its end; an
/// error if it does not exist.
Error checkChannelPath(const std::string &Path, bool Regular = false) {
  struct stat St;
  if (::lstat(Path.c_str(), &St) != 0)
    return pipeError(std::errc::no_such_file_or_directory,
                     "cannot use " + Path + ": " + std::strerror(errno));
  return checkChannelStat(St, Path, Regular);
}

/// Checks the open channel file \p FD (what was opened, not the name).
Error checkChannelFD(int FD, const std::string &Path, bool Regular = false) {
  struct stat St;
  if (::fstat(FD, &St) != 0)
    return pipeError(std::errc::io_error,
                     "cannot check " + Path + ": " + std::strerror(errno));
  return checkChannelStat(St, Path, Regular);
}

/// Checks the folder of the channel base \p Base: it belongs to this
/// process's user and neither the group nor others may write it, so nobody
/// else can put or replace a FIFO there.
Error checkChannelFolder(const std::string &Base) {
  StringRef Parent = sys::path::parent_path(Base);
  std::string Folder = Parent.empty() ? "." : Parent.str();
  struct stat St;
  if (::stat(Folder.c_str(), &St) != 0)
    return pipeError(std::errc::no_such_file_or_directory,
                     "cannot use the channel folder " + Folder + ": " +
                         std::strerror(errno));
  if (!S_ISDIR(St.st_mode))
    return pipeError(std::errc::not_a_directory,
                     Folder + " (the channel's folder) is not a folder");
  uid_t Me = ::geteuid();
  if (St.st_uid != Me)
    return pipeError(std::errc::permission_denied,
                     "refusing the channel " + Base + ": its folder " + Folder +
                         " belongs to user " + describeUser(St.st_uid) +
                         ", not to " + describeUser(Me) +
                         " who runs this compiler; " + PrivateFolderFix);
  if (St.st_mode & (S_IWGRP | S_IWOTH))
    return pipeError(std::errc::permission_denied,
                     "refusing the channel " + Base + ": its folder " + Folder +
                         " may be written by its group or others (mode " +
                         modeText(St.st_mode) +
                         "), who could put their own FIFOs there; " +
                         PrivateFolderFix);
  return Error::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// FdByteReader
//===----------------------------------------------------------------------===//

FdByteReader::FdByteReader(int FD, std::string Path, milliseconds Timeout)
    : FD(FD), Path(std::move(Path)), Timeout(Timeout) {}

Expected<bool> FdByteReader::fill(const Twine &What) {
  if (Eof)
    return false;
  if (Start > 0 && Start >= Buf.size() / 2) {
    Buf.erase(0, Start);
    Start = 0;
  }
  Clock::time_point Deadline = Clock::now() + Timeout;
  char Chunk[65536];
  while (true) {
    Expected<short> Ready = pollUntil(FD, POLLIN, Deadline, Path);
    if (!Ready)
      return Ready.takeError();
    if (*Ready == 0) {
      TimedOut = true;
      return pipeError(std::errc::timed_out,
                       Path + ": nothing from the model within " +
                           formatBound(Timeout) + " while waiting for " + What +
                           " (stream offset " +
                           Twine(Offset + Buf.size() - Start) + ")");
    }
    ssize_t N = ::read(FD, Chunk, sizeof(Chunk));
    if (N > 0) {
      Buf.append(Chunk, static_cast<size_t>(N));
      return true;
    }
    if (N == 0) {
      // poll() said readable and read() gives nothing: the writer is gone.
      Eof = true;
      return false;
    }
    if (errno != EINTR && errno != EAGAIN)
      return pipeError(std::errc::io_error,
                       "reading " + Path + " failed: " + std::strerror(errno));
  }
}

Error FdByteReader::readExact(MutableArrayRef<char> Out) {
  if (Out.empty())
    return Error::success();
  while (Buf.size() - Start < Out.size()) {
    Expected<bool> More = fill(Twine(Out.size()) + " bytes");
    if (!More)
      return More.takeError();
    if (!*More) {
      size_t Have = Buf.size() - Start;
      if (Have == 0)
        return make_error<EndOfStreamError>(Offset);
      return pipeError(std::errc::connection_aborted,
                       Path + ": the model closed the pipe after " +
                           Twine(Have) + " of " + Twine(Out.size()) +
                           " bytes (input truncated at byte offset " +
                           Twine(Offset + Have) + ")");
    }
  }
  std::memcpy(Out.data(), Buf.data() + Start, Out.size());
  Start += Out.size();
  Offset += Out.size();
  return Error::success();
}

Error FdByteReader::readLine(std::string &Line, size_t MaxLen) {
  size_t Scanned = 0;
  while (true) {
    size_t Limit = MaxLen == SIZE_MAX ? MaxLen : MaxLen + 1;
    StringRef Avail = StringRef(Buf).drop_front(Start);
    size_t NL = Avail.take_front(Limit).find('\n', Scanned);
    if (NL != StringRef::npos) {
      Line.assign(Avail.data(), NL);
      Start += NL + 1;
      Offset += NL + 1;
      return Error::success();
    }
    Scanned = Avail.size();
    if (Scanned > MaxLen)
      return createStringError(inconvertibleErrorCode(),
                               "%s: line at byte offset %llu is longer than "
                               "the limit of %zu bytes",
                               Path.c_str(),
                               static_cast<unsigned long long>(Offset), MaxLen);
    Expected<bool> More = fill("the end of a line");
    if (!More)
      return More.takeError();
    if (!*More) {
      if (Scanned == 0)
        return make_error<EndOfStreamError>(Offset);
      return pipeError(std::errc::connection_aborted,
                       Path +
                           ": the model closed the pipe in a line that "
                           "started at byte offset " +
                           Twine(Offset) + " (no final '\\n')");
    }
  }
}

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
  auto Close = llvm::make_scope_exit([FD] { ::close(FD); });
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
  Error Result = Error::success();
  if (Reader && Broken.empty() && sendsEnd()) {
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
  return V;
}

} // namespace mlbridge
