//===- ChannelTrust.cpp - Whose are the channel files? --------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "ChannelTrust.h"
#include "FifoIO.h"

#include "mlbridge/ModelRegistry.h"

#include "llvm/Support/Path.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

using namespace llvm;

namespace mlbridge::pipe_internal {

static std::string modeText(mode_t M) {
  char Buf[16];
  std::snprintf(Buf, sizeof(Buf), "%04o", static_cast<unsigned>(M & 07777));
  return Buf;
}

/// The fix every trust error names.
static constexpr const char *PrivateFolderFix =
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
Error checkChannelPath(const std::string &Path, bool Regular) {
  struct stat St;
  if (::lstat(Path.c_str(), &St) != 0)
    return pipeError(std::errc::no_such_file_or_directory,
                     "cannot use " + Path + ": " + std::strerror(errno));
  return checkChannelStat(St, Path, Regular);
}

/// Checks the open channel file \p FD (what was opened, not the name).
Error checkChannelFD(int FD, const std::string &Path, bool Regular) {
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

} // namespace mlbridge::pipe_internal
