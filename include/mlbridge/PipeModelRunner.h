//===- PipeModelRunner.h - A model in another process, over FIFOs -*- C++
//-*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The compiler side of LLVM's interactive named-pipe protocol
/// (llvm/lib/Analysis/InteractiveModelRunner.cpp), with bounded waits and
/// clear errors. docs/pipe-protocol.md describes the bytes.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_PIPEMODELRUNNER_H
#define MLBRIDGE_PIPEMODELRUNNER_H

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/SerDes/ByteReader.h"
#include "mlbridge/SerDes/SerDes.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlbridge {

/// Whether a PipeModelRunner ends the session with mlbridge's end record.
enum class PipeEndRecord {
  /// Bitstream (LLVM's protocol, which has no end record): only if the model
  /// side announced that it understands it (`<base>.ext`, see
  /// PipeModelRunnerOptions). JSON and protobuf (mlbridge's own formats,
  /// which every model side speaking them understands): always.
  Negotiated,
  /// Always (the user opts in for a model side known to understand it).
  Always,
  /// Never.
  Never,
};

/// The name of the end-of-session extension in `<base>.ext`.
inline constexpr const char *PipeExtensionEnd = "end";
/// The name of the typed-reply extension in `<base>.ext`: with bitstream, each
/// reply is framed as `{"advice":<id>,"spec":<advice spec>}\n`, the raw bytes,
/// `\n`, so that the runner can check the reply's name, type and shape
/// against the advice spec (LLVM's raw reply carries none of them).
inline constexpr const char *PipeExtensionTypedReply = "typed-reply";

/// How a PipeModelRunner connects and talks.
///
/// Trust: before opening the FIFOs, the runner checks that their folder and
/// the FIFOs belong to this process's effective user and that neither the
/// group nor others may write them; otherwise it refuses, naming the owner
/// (another user could answer in the model's place, or read the
/// observations). Make the channel in a private folder (mode 0700).
///
/// Extensions: LLVM's protocol has no way for the model to say what it
/// understands, so a model side that understands mlbridge's extensions says
/// so in a small file `<base>.ext` beside the FIFOs (their words separated
/// by white space, e.g. `end`), written before it opens `<base>.out`; the
/// runner reads it once connected (it then exists, if the model made one)
/// and checks it as the FIFOs. A host written for stock LLVM writes none and
/// gets nothing it has not asked for. With bitstream, a model side that
/// announced `typed-reply` gets an acknowledgement before the header,
/// `{"extensions":[...]}\n` listing the extensions the runner uses (so that
/// it frames its replies only for a runner that reads frames), and must then
/// frame every reply (PipeExtensionTypedReply).
///
/// Reply checks: a reply is read as the advice spec says (raw: exactly its
/// bytes; typed-reply and records: checked name, type and shape), and any
/// byte the model sends beyond it, before the next observation or the end of
/// the session, is an error. What LLVM's raw reply cannot carry (its type) is
/// not checked without typed-reply: docs/pipe-protocol.md has the table.
struct PipeModelRunnerOptions {
  /// The channel base: the runner writes `<base>.out` and reads `<base>.in`.
  std::string ChannelBase;
  /// Bitstream is LLVM's protocol exactly: observations in the bitstream
  /// layout, the reply is the advice tensor's raw bytes. JSON and Protobuf
  /// send records both ways: the reply is an advice message record.
  SerDesKind Kind = SerDesKind::Bitstream;
  /// Bound of the wait for the model to open its ends of the FIFOs.
  std::chrono::milliseconds ConnectTimeout{60000};
  /// Bound of each wait for the model to read an observation or to send
  /// (the next part of) a reply.
  std::chrono::milliseconds Timeout{300000};
  /// Create the FIFOs (mode 0600) if they do not exist, and remove the ones
  /// created when the runner is destroyed. A stale FIFO at either path is
  /// reused; any other kind of file is an error.
  bool CreateFifos = false;
  /// Limits of the reply decoder.
  DecoderLimits Limits;
  /// The spec of the score a training session reports per observation with
  /// sendOutcome(); it is sent in the header (LLVM's training-log layout).
  std::optional<TensorSpec> Score;
  /// Whether to send an end record (`{"end":true}`) when the session is
  /// finished (finish() or destruction), so that the model can tell a
  /// finished session from a crashed compiler. A host that only knows
  /// LLVM's protocol cannot parse it: by default it is sent only to a model
  /// side that announced it (see above), and always with JSON and protobuf.
  PipeEndRecord SendEnd = PipeEndRecord::Negotiated;
};

/// Reads a FIFO (or any file descriptor that supports poll) through the
/// ByteReader interface, waiting at most a fixed time for each chunk. The end
/// of input is a read of zero bytes after poll() reports the descriptor
/// ready, i.e. the writer closed its end; it is never mistaken for "no data
/// yet" (no busy loop). Errors name \p Path and the bound.
class FdByteReader final : public ByteReader {
public:
  /// Reads \p FD (not owned; made non-blocking by the caller or not, both
  /// work), naming it \p Path in errors.
  FdByteReader(int FD, std::string Path, std::chrono::milliseconds Timeout);

  llvm::Error readExact(llvm::MutableArrayRef<char> Buffer) override;
  llvm::Error readLine(std::string &Line, size_t MaxLen) override;
  uint64_t offset() const override { return Offset; }

  /// True once the writer has closed its end and every byte was consumed.
  bool atEnd() const { return Eof && Start == Buf.size(); }
  /// True if the last failure was a timeout.
  bool timedOut() const { return TimedOut; }
  /// Reads whatever the writer has sent so far, without waiting, and returns
  /// the number of bytes not yet consumed.
  llvm::Expected<size_t> available();
  /// The bytes read but not yet consumed.
  llvm::StringRef buffered() const {
    return llvm::StringRef(Buf).drop_front(Start);
  }

private:
  /// Reads one more chunk into Buf; false at the end of input.
  llvm::Expected<bool> fill(const llvm::Twine &What);

  int FD;
  std::string Path;
  std::chrono::milliseconds Timeout;
  std::string Buf;
  size_t Start = 0;
  uint64_t Offset = 0;
  bool Eof = false;
  bool TimedOut = false;
};

/// Asks a model in another process over two FIFOs, speaking LLVM's
/// interactive protocol: the runner opens `<base>.in` for reading and then
/// `<base>.out` for writing (as LLVM's InteractiveModelRunner does, but
/// without blocking: O_NONBLOCK opens retried until the connect bound), sends
/// the header on first use, then one observation per evaluation, and reads
/// the reply.
///
/// Peer death is an error, never a hang or a signal: a write to a FIFO whose
/// reader has gone raises SIGPIPE, so the runner blocks SIGPIPE on the
/// calling thread around each write, takes the EPIPE, and discards the
/// pending signal before restoring the thread's mask. A read that finds the
/// writer gone (end of file) is an error naming the FIFO.
class PipeModelRunner final : public MLModelRunner {
public:
  /// Checks the specs and options; connects on first use.
  static llvm::Expected<std::unique_ptr<PipeModelRunner>>
  create(std::vector<TensorSpec> FeatureSpecs, TensorSpec AdviceSpec,
         PipeModelRunnerOptions Options);

  ~PipeModelRunner() override;

  /// Opens the FIFOs (if not yet open) and sends the header. Called by the
  /// first evaluation or switchContext().
  llvm::Error connect();

  /// Sends a context record (LLVM sends the function or module name); the
  /// following observations are numbered from 0.
  llvm::Error switchContext(llvm::StringRef Name) override;

  /// Reports the outcome (reward) of observation \p ObservationId of the
  /// current context as an outcome message holding \p Score, which must match
  /// the options' score spec. The model does not reply. For training: send
  /// it once the consequence of the decision is known.
  llvm::Error sendOutcome(int64_t ObservationId,
                          const TensorValue &Score) override;
  /// The options' score spec.
  std::optional<TensorSpec> scoreSpec() const override { return Options.Score; }

  /// Changes the feature and advice specs (per-request specs): the next
  /// message is preceded by a new header, which replaces the first one on
  /// the model side. The feature buffers are made anew (zero-filled). Not
  /// for a host that only knows LLVM's protocol.
  llvm::Error changeSpecs(std::vector<TensorSpec> FeatureSpecs,
                          TensorSpec AdviceSpec) override;

  /// Outcomes (with a score spec) and spec changes.
  Capabilities capabilities() const override {
    return {/*Outcomes=*/true, /*SpecChanges=*/true};
  }
  /// False once finished or failed.
  bool usable() const override { return !finished() && !failed(); }

  /// Ends the session: sends the end record (unless disabled) and closes both
  /// FIFOs, so the model sees the end. Idempotent; later evaluations fail.
  /// The destructor calls it and drops its error.
  llvm::Error finish() override;

  /// The options.
  const PipeModelRunnerOptions &options() const { return Options; }
  /// True once finish() ran (or the destructor started).
  bool finished() const { return Finished; }
  /// True once the channel failed; every later call fails with the reason.
  bool failed() const { return !Broken.empty(); }
  /// `<base>.out`, compiler to model.
  const std::string &outboundPath() const { return OutPath; }
  /// `<base>.in`, model to compiler.
  const std::string &inboundPath() const { return InPath; }
  /// `<base>.ext`, where a model side announces the extensions it
  /// understands.
  const std::string &extensionsPath() const { return ExtPath; }
  /// True if the model side announced extension \p Name in `<base>.ext`
  /// (known once connected).
  bool modelUnderstands(llvm::StringRef Name) const;
  /// True if finish() sends the end record (known once connected).
  bool sendsEnd() const;
  /// True if replies are framed and checked (bitstream, and the model side
  /// announced `typed-reply`; known once connected).
  bool typedReplies() const;

protected:
  llvm::Expected<TensorValue>
  evaluateUntyped(llvm::ArrayRef<TensorRef> Features) override;

private:
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

public:
  /// Use create().
  PipeModelRunner(PrivateTag, std::vector<TensorSpec> FeatureSpecs,
                  TensorSpec AdviceSpec, PipeModelRunnerOptions Options,
                  std::unique_ptr<SerDes> Out, std::unique_ptr<SerDes> In);

private:
  llvm::Error makeFifos();
  /// Reads `<base>.ext` (if there) into ModelExtensions.
  llvm::Error readExtensions();
  Header currentHeader() const;
  llvm::Error writeAll(llvm::StringRef Data, const llvm::Twine &What);
  /// Writes \p Parts in order with writev(), each wait bounded as writeAll().
  llvm::Error writeAllV(llvm::ArrayRef<llvm::StringRef> Parts,
                        const llvm::Twine &What);
  llvm::Expected<TensorValue> readReply(int64_t Id);
  /// Reads a typed-reply frame for observation \p Id and checks it against
  /// the advice spec.
  llvm::Expected<TensorValue> readTypedReply(int64_t Id);
  /// Fails if the model has sent bytes nobody asked for (beyond the last
  /// reply); reads only what has arrived, without waiting.
  llvm::Error checkNoLeftover();
  /// Marks the runner broken: later evaluations fail at once.
  llvm::Error fail(llvm::Error E);

  PipeModelRunnerOptions Options;
  std::string InPath, OutPath, ExtPath;
  /// The words of `<base>.ext`, read on connecting.
  std::vector<std::string> ModelExtensions;
  std::unique_ptr<SerDes> Out, In;
  std::unique_ptr<FdByteReader> Reader;
  int InFD = -1, OutFD = -1;
  bool CreatedIn = false, CreatedOut = false;
  int64_t NextId = 0;
  /// The last observation answered (for the wording of a leftover error).
  std::optional<int64_t> LastAnswered;
  bool HeaderPending = false;
  bool Finished = false;
  std::string Broken;
  /// Reused for every observation, so that their memory stays mapped.
  std::string Scratch;
  std::vector<SerDes::Piece> Pieces;
  std::vector<llvm::StringRef> Parts;
};

} // namespace mlbridge

#endif // MLBRIDGE_PIPEMODELRUNNER_H
