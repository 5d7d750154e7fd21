// The toy environment (see rl_toy_env.h).
#include "rl_toy_env.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/train/rl_batch.h"

namespace cudaagent::testing {

double pattern_reward(const Trajectory& trajectory, std::int64_t vocab) {
  std::int64_t previous = trajectory.prompt_ids.back();
  int scored = 0;
  int correct = 0;
  for (std::size_t i = 0; i < trajectory.response_ids.size(); ++i) {
    const std::int64_t token = trajectory.response_ids[i];
    if (trajectory.loss_mask[i] != 0) {
      ++scored;
      correct += token == (previous + 1) % vocab ? 1 : 0;
    }
    previous = token;
  }
  return scored == 0 ? 0.0 : static_cast<double>(correct) / scored;
}

std::vector<Trajectory> sample_episodes(ToyPolicyModel& model, const ToyEpisodes& spec,
                                        at::Generator& generator, const std::string& prefix) {
  at::NoGradGuard no_grad;
  const std::int64_t vocab = model.vocab_size();
  std::vector<Trajectory> episodes(static_cast<std::size_t>(spec.rows));
  auto draw = [&](std::int64_t low, std::int64_t high) {  // uniform in [low, high)
    return at::randint(low, high, {1}, generator).item<std::int64_t>();
  };
  for (std::size_t i = 0; i < episodes.size(); ++i) {
    episodes[i].id = prefix + std::to_string(i);
    const std::int64_t length = draw(spec.prompt_min, spec.prompt_max + 1);
    for (std::int64_t j = 0; j < length; ++j)
      episodes[i].prompt_ids.push_back(static_cast<std::int32_t>(draw(0, vocab)));
  }
  for (int turn = 0; turn < spec.turns; ++turn) {
    for (int step = 0; step < spec.model_tokens; ++step) {
      // Every sequence so far as a prompt: the last prompt column predicts the next token.
      std::vector<Trajectory> contexts(episodes.size());
      std::vector<const Trajectory*> pointers;
      for (std::size_t i = 0; i < episodes.size(); ++i) {
        contexts[i].prompt_ids = episodes[i].prompt_ids;
        contexts[i].prompt_ids.insert(contexts[i].prompt_ids.end(),
                                      episodes[i].response_ids.begin(),
                                      episodes[i].response_ids.end());
        pointers.push_back(&contexts[i]);
      }
      RlBatch batch = collate(pointers);
      at::Tensor logits = model.logits(batch.tokens).select(1, batch.tokens.response_start - 1);
      at::Tensor log_probs = at::log_softmax(logits.to(at::kCPU, at::kFloat), -1);
      at::Tensor tokens = at::multinomial(log_probs.exp(), 1, false, generator).squeeze(-1);
      at::Tensor chosen = log_probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1);
      for (std::size_t i = 0; i < episodes.size(); ++i) {
        const auto row = static_cast<std::int64_t>(i);
        episodes[i].response_ids.push_back(
            static_cast<std::int32_t>(tokens[row].item<std::int64_t>()));
        episodes[i].loss_mask.push_back(1);
        episodes[i].behaviour_log_probs.push_back(chosen[row].item<float>());
      }
    }
    if (turn + 1 == spec.turns) break;
    for (auto& episode : episodes) {
      for (int k = 0; k < spec.observation_tokens; ++k) {
        episode.response_ids.push_back(static_cast<std::int32_t>(draw(0, vocab)));
        episode.loss_mask.push_back(0);
        episode.behaviour_log_probs.push_back(0.0F);
      }
    }
  }
  for (auto& episode : episodes) {
    episode.reward = pattern_reward(episode, vocab);
    episode.finish_reason = "stop";
  }
  return episodes;
}

std::vector<Trajectory> random_trajectories(int rows, int prompt_length, int response_length,
                                            int turns, std::int64_t vocab, std::uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  std::vector<Trajectory> out(static_cast<std::size_t>(rows));
  const float rewards[] = {-1.0F, 1.0F, 2.0F, 3.0F};
  for (int r = 0; r < rows; ++r) {
    Trajectory& t = out[static_cast<std::size_t>(r)];
    t.id = std::to_string(r);
    t.id.insert(t.id.begin(), 'r');
    at::Tensor prompt = at::randint(0, vocab, {prompt_length}, generator).to(at::kInt);
    at::Tensor response = at::randint(0, vocab, {response_length}, generator).to(at::kInt);
    at::Tensor log_probs = at::rand({response_length}, generator) * -3.0 - 1e-3;
    t.prompt_ids.assign(prompt.data_ptr<std::int32_t>(),
                        prompt.data_ptr<std::int32_t>() + prompt_length);
    t.response_ids.assign(response.data_ptr<std::int32_t>(),
                          response.data_ptr<std::int32_t>() + response_length);
    t.behaviour_log_probs.assign(log_probs.data_ptr<float>(),
                                 log_probs.data_ptr<float>() + response_length);
    // Turns of equal length; the last fifth of every turn but the last is an observation.
    t.loss_mask.assign(static_cast<std::size_t>(response_length), 1);
    const int turn_length = response_length / std::max(turns, 1);
    for (int turn = 0; turn + 1 < turns; ++turn) {
      for (int j = turn_length * turn + turn_length * 4 / 5; j < turn_length * (turn + 1); ++j) {
        t.loss_mask[static_cast<std::size_t>(j)] = 0;
        t.behaviour_log_probs[static_cast<std::size_t>(j)] = 0.0F;
      }
    }
    t.reward = rewards[at::randint(0, 4, {1}, generator).item<std::int64_t>()];
    t.finish_reason = "stop";
  }
  return out;
}

void append_trajectory_record(std::string& out, const Trajectory& trajectory) {
  JsonWriter json(out);
  json.begin_object().field("id", trajectory.id).key("trajectory").begin_object();
  json.key("prompt_ids").begin_array();
  for (auto id : trajectory.prompt_ids) json.value(static_cast<std::int64_t>(id));
  json.end_array().key("response_ids").begin_array();
  for (auto id : trajectory.response_ids) json.value(static_cast<std::int64_t>(id));
  json.end_array().key("loss_mask").begin_array();
  for (auto bit : trajectory.loss_mask) json.value(static_cast<std::int64_t>(bit));
  json.end_array();
  if (!trajectory.behaviour_log_probs.empty()) {
    json.key("logprobs").begin_array();
    for (std::size_t i = 0; i < trajectory.behaviour_log_probs.size(); ++i) {
      if (trajectory.loss_mask[i] == 0) {
        json.null();
      } else {
        json.value(static_cast<double>(trajectory.behaviour_log_probs[i]));
      }
    }
    json.end_array();
  }
  json.field("finish_reason", trajectory.finish_reason);
  if (!trajectory.tool_calls.empty()) {
    json.key("turns").begin_array().begin_object().key("tool_calls").begin_array();
    for (const auto& call : trajectory.tool_calls) {
      json.begin_object()
          .field("name", call.name)
          .key("arguments")
          .raw(call.arguments.empty() ? "{}" : call.arguments);
      json.field("ok", call.valid).end_object();
    }
    json.end_array().end_object().end_array();
  }
  json.end_object().key("reward").begin_object().field("value", trajectory.reward).end_object();
  json.end_object();
  out.push_back('\n');
}

}  // namespace cudaagent::testing
