//===- ChannelTrust.h - Whose are the channel files? ------------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Internal to MLBridge::Pipe: the checks that only this process's user made,
// and can replace, the FIFOs (and the `<base>.ext` file) of a channel, so
// that nobody else can answer in the model's place.
//
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_RUNTIME_PIPE_CHANNELTRUST_H
#define MLBRIDGE_RUNTIME_PIPE_CHANNELTRUST_H

#include "llvm/Support/Error.h"

#include <string>
#include <sys/stat.h>

namespace mlbridge::pipe_internal {

/// Checks the status \p St of channel file \p Path (a FIFO, or the
/// `<base>.ext` regular file if \p Regular): it belongs to this process's
/// user and neither the group nor others may write it.
llvm::Error checkChannelStat(const struct stat &St, const std::string &Path,
                             bool Regular);

/// Checks channel file \p Path without following a link at its end; an
/// error if it does not exist.
llvm::Error checkChannelPath(const std::string &Path, bool Regular = false);

/// Checks the open channel file \p FD (what was opened, not the name).
llvm::Error checkChannelFD(int FD, const std::string &Path,
                           bool Regular = false);

/// Checks the folder of the channel base \p Base: it belongs to this
/// process's user and neither the group nor others may write it, so nobody
/// else can put or replace a FIFO there.
llvm::Error checkChannelFolder(const std::string &Base);

} // namespace mlbridge::pipe_internal

#endif // MLBRIDGE_RUNTIME_PIPE_CHANNELTRUST_H
