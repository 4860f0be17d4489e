//===- FifoIO.cpp - Bounded reads and writes on FIFOs ---------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The helpers of FifoIO.h, and FdByteReader: bounded reads of a FIFO.
//
//===----------------------------------------------------------------------===//

#include "FifoIO.h"

#include "mlbridge/PipeModelRunner.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

using namespace llvm;
using namespace mlbridge::pipe_internal;
using std::chrono::milliseconds;

namespace mlbridge {

namespace pipe_internal {

Error pipeError(std::errc Code, const Twine &Msg) {
  return createStringError(std::make_error_code(Code), Msg);
}

std::string formatBound(milliseconds Bound) {
  return formatv("{0} ms", Bound.count()).str();
}

/// Milliseconds left until \p Deadline, for poll(): at least 1 while time
/// remains, 0 once it has passed.
static int remainingMs(Clock::time_point Deadline) {
  auto Left = std::chrono::duration_cast<milliseconds>(Deadline - Clock::now());
  if (Left.count() <= 0)
    return Clock::now() >= Deadline ? 0 : 1;
  return static_cast<int>(std::min<int64_t>(Left.count() + 1, INT32_MAX));
}

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

SigPipeBlocker::SigPipeBlocker() {
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

SigPipeBlocker::~SigPipeBlocker() {
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

} // namespace pipe_internal

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

Expected<size_t> FdByteReader::available() {
  char Chunk[4096];
  // Enough to say how much was sent; a flood is not read to its end.
  constexpr size_t Enough = 65536;
  while (!Eof && Buf.size() - Start < Enough) {
    struct pollfd P = {FD, POLLIN, 0};
    int Ready = ::poll(&P, 1, /*timeout=*/0);
    if (Ready < 0 && errno == EINTR)
      continue;
    if (Ready < 0)
      return pipeError(std::errc::io_error,
                       "polling " + Path + " failed: " + std::strerror(errno));
    if (Ready == 0)
      break; // nothing more has arrived
    ssize_t N = ::read(FD, Chunk, sizeof(Chunk));
    if (N > 0) {
      Buf.append(Chunk, static_cast<size_t>(N));
      continue;
    }
    if (N == 0) {
      Eof = true;
      break;
    }
    if (errno == EAGAIN)
      break;
    if (errno != EINTR)
      return pipeError(std::errc::io_error,
                       "reading " + Path + " failed: " + std::strerror(errno));
  }
  return Buf.size() - Start;
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

} // namespace mlbridge
