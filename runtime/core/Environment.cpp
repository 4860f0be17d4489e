//===- Environment.cpp - Reinforcement-learning loop, in process ----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/Environment.h"

#include <cmath>

using namespace llvm;

namespace mlbridge {

Environment::~Environment() = default;

static Error makeError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message.str());
}

template <typename T>
static Expected<size_t> argmaxOf(ArrayRef<T> Values, StringRef Name) {
  size_t Best = 0;
  for (size_t I = 0; I < Values.size(); ++I) {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(Values[I]))
        return makeError("advice '" + Name + "' element " + Twine(I) +
                         " is NaN: no argmax action");
    if (Values[I] > Values[Best])
      Best = I;
  }
  return Best;
}

Expected<size_t> argmaxAction(const TensorValue &Advice) {
  if (Advice.getElementCount() == 0)
    return makeError("advice '" + Advice.name() +
                     "' is empty: no argmax action");
  switch (Advice.type()) {
  case ElementType::Int8:
    return argmaxOf(Advice.data<int8_t>(), Advice.name());
  case ElementType::UInt8:
    return argmaxOf(Advice.data<uint8_t>(), Advice.name());
  case ElementType::Int16:
    return argmaxOf(Advice.data<int16_t>(), Advice.name());
  case ElementType::UInt16:
    return argmaxOf(Advice.data<uint16_t>(), Advice.name());
  case ElementType::Int32:
    return argmaxOf(Advice.data<int32_t>(), Advice.name());
  case ElementType::UInt32:
    return argmaxOf(Advice.data<uint32_t>(), Advice.name());
  case ElementType::Int64:
    return argmaxOf(Advice.data<int64_t>(), Advice.name());
  case ElementType::UInt64:
    return argmaxOf(Advice.data<uint64_t>(), Advice.name());
  case ElementType::Float:
    return argmaxOf(Advice.data<float>(), Advice.name());
  case ElementType::Double:
    return argmaxOf(Advice.data<double>(), Advice.name());
  case ElementType::Bool:
  case ElementType::String:
    break;
  }
  return makeError("advice '" + Advice.name() + "' is " +
                   elementTypeName(Advice.type()) +
                   ": argmax needs numeric logits (use ActionSelection::Raw)");
}

static Error atStep(size_t Step, Error E) {
  return makeError("episode step " + Twine(Step) + ": " +
                   toString(std::move(E)));
}

Expected<EpisodeResult> runEpisode(Environment &Env,
                                   ArrayRef<MLModelRunner *> Agents,
                                   const EpisodeOptions &Options) {
  if (Agents.empty())
    return makeError("runEpisode: no agents");
  for (size_t I = 0; I < Agents.size(); ++I)
    if (!Agents[I])
      return makeError("runEpisode: agent " + Twine(I) + " is null");
  if (Error E = Env.reset())
    return makeError("episode reset: " + toString(std::move(E)));

  EpisodeResult Result;
  while (!Env.isDone()) {
    size_t Step = Result.Steps;
    if (Step >= Options.MaxSteps)
      return makeError("episode not done after " + Twine(Options.MaxSteps) +
                       " steps (EpisodeOptions::MaxSteps): the environment's "
                       "isDone() never became true");
    size_t AgentIndex = Env.nextAgent();
    if (AgentIndex >= Agents.size())
      return makeError("episode step " + Twine(Step) +
                       ": the environment chose agent " + Twine(AgentIndex) +
                       " but there are " + Twine(Agents.size()) + " agents");
    MLModelRunner &Agent = *Agents[AgentIndex];
    if (Error E = Env.observe(Agent))
      return atStep(Step, std::move(E));
    Expected<TensorValue> Advice = Agent.evaluateChecked();
    if (!Advice)
      return atStep(Step, makeError("agent " + Twine(AgentIndex) + ": " +
                                    toString(Advice.takeError())));
    Action A{AgentIndex, std::nullopt, std::move(*Advice)};
    if (Env.actionSelection(AgentIndex) == ActionSelection::Argmax) {
      Expected<size_t> Index = argmaxAction(A.Advice);
      if (!Index)
        return atStep(Step, makeError("agent " + Twine(AgentIndex) + ": " +
                                      toString(Index.takeError())));
      A.Index = *Index;
    }
    if (Error E = Env.step(A))
      return atStep(Step, std::move(E));
    ++Result.Steps;
    if (Options.RecordActions)
      Result.Actions.push_back(std::move(A));
  }
  return Result;
}

Expected<EpisodeResult> runEpisode(Environment &Env, MLModelRunner &Agent,
                                   const EpisodeOptions &Options) {
  MLModelRunner *Agents[] = {&Agent};
  return runEpisode(Env, ArrayRef<MLModelRunner *>(Agents), Options);
}

} // namespace mlbridge
