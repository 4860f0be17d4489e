//===- Environment.h - Reinforcement-learning loop, in process --*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Runs a trained policy inside the compiler as an episode: the pass
/// subclasses Environment (its state, observations, the effect of an action,
/// when it is done, which agent acts next) and runEpisode() loops
///
///   reset() -> [ nextAgent() -> observe(agent) -> agent decides -> step() ]
///
/// until isDone(), within a step limit. An agent is any MLModelRunner (an
/// OnnxModelRunner in production, a pipe or gRPC runner while training, a
/// CallbackModelRunner in tests); the loop knows nothing of which.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_ENVIRONMENT_H
#define MLBRIDGE_ENVIRONMENT_H

#include "mlbridge/MLModelRunner.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <optional>
#include <vector>

namespace mlbridge {

/// How an agent's advice becomes an action.
enum class ActionSelection {
  /// The index of the largest advice element (logits or Q-values, flattened
  /// row-major; the first on ties). Needs numeric advice without NaN.
  Argmax,
  /// The advice itself (a continuous action, a score, several values).
  Raw,
};

/// What an agent decided at one step.
struct Action {
  /// The index of the agent that acted (into runEpisode()'s agents).
  size_t Agent;
  /// With ActionSelection::Argmax, the chosen index; unset with Raw.
  std::optional<size_t> Index;
  /// The agent's advice as the model returned it.
  TensorValue Advice;
};

/// The pass's side of an episode. Subclass it; runEpisode() calls it.
class Environment {
public:
  virtual ~Environment();

  /// Starts a new episode (reset the state, choose the first agent).
  virtual llvm::Error reset() = 0;

  /// Writes the current observation into \p Agent's features (with
  /// setFeature() or populateFeatures()), just before \p Agent decides.
  virtual llvm::Error observe(MLModelRunner &Agent) = 0;

  /// Applies \p A, the decision of agent \p A.Agent, and moves to the next
  /// state (and the next agent, for several agents).
  virtual llvm::Error step(const Action &A) = 0;

  /// True when the episode has ended (checked after reset() and each step).
  virtual bool isDone() const = 0;

  /// The agent that acts next, an index into runEpisode()'s agents. A
  /// single-agent environment keeps the default, 0.
  virtual size_t nextAgent() const { return 0; }

  /// How agent \p AgentIndex's advice becomes an action (default Argmax).
  virtual ActionSelection actionSelection(size_t AgentIndex) const {
    (void)AgentIndex;
    return ActionSelection::Argmax;
  }
};

/// Bounds of an episode.
struct EpisodeOptions {
  /// More steps than this without isDone() is an error, not a hang.
  size_t MaxSteps = 100000;
  /// Keep every action in EpisodeResult::Actions (copies each advice).
  bool RecordActions = true;
};

/// What happened in an episode.
struct EpisodeResult {
  /// The number of steps taken.
  size_t Steps = 0;
  /// Every action, in order (if EpisodeOptions::RecordActions).
  std::vector<Action> Actions;
};

/// Runs one episode of \p Env with \p Agents (none may be null), the agent of
/// each step chosen by Env.nextAgent(). Errors from the environment or an
/// agent end the episode and are returned, prefixed with the step number.
llvm::Expected<EpisodeResult> runEpisode(Environment &Env,
                                         llvm::ArrayRef<MLModelRunner *> Agents,
                                         const EpisodeOptions &Options = {});

/// Runs one episode of \p Env with a single agent.
llvm::Expected<EpisodeResult> runEpisode(Environment &Env, MLModelRunner &Agent,
                                         const EpisodeOptions &Options = {});

/// The index of the largest element of \p Advice (see
/// ActionSelection::Argmax); an error for bool, string, empty or NaN advice.
llvm::Expected<size_t> argmaxAction(const TensorValue &Advice);

} // namespace mlbridge

#endif // MLBRIDGE_ENVIRONMENT_H
