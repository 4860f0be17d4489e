//===- FifoIO.h - Bounded reads and writes on FIFOs -------------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Internal to MLBridge::Pipe: the errors, waits and SIGPIPE handling that
// PipeModelRunner's reads (FdByteReader) and writes share.
//
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_RUNTIME_PIPE_FIFOIO_H
#define MLBRIDGE_RUNTIME_PIPE_FIFOIO_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <csignal>
#include <string>
#include <system_error>

namespace mlbridge::pipe_internal {

using Clock = std::chrono::steady_clock;

/// An error of category \p Code saying \p Msg.
llvm::Error pipeError(std::errc Code, const llvm::Twine &Msg);

/// \p Bound for errors: "250 ms".
std::string formatBound(std::chrono::milliseconds Bound);

/// Waits for \p Events on \p FD until \p Deadline. Returns the revents, or 0
/// on timeout.
llvm::Expected<short> pollUntil(int FD, short Events,
                                Clock::time_point Deadline,
                                llvm::StringRef Path);

/// Blocks SIGPIPE on this thread for its lifetime, then restores the mask. A
/// write to a FIFO without reader fails with EPIPE and raises SIGPIPE: call
/// raised() then, and the signal is discarded (unless one was pending before).
/// Two system calls on the usual path (block, restore): with SIGPIPE not
/// blocked before, none can have been pending, since the kernel delivers an
/// unblocked signal before returning to the thread.
class SigPipeBlocker {
public:
  SigPipeBlocker();
  ~SigPipeBlocker();
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

} // namespace mlbridge::pipe_internal

#endif // MLBRIDGE_RUNTIME_PIPE_FIFOIO_H
