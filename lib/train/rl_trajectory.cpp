// Reading trajectory records and the rft behaviour filters. Token arrays can hold 10^5 entries,
// so each is read with one pass over simdjson's DOM array into a reserved vector.
#include "cudaagent/train/rl_trajectory.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace cudaagent {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

Result<array> array_field(object parent, std::string_view key, const std::string& path) {
  element value;
  if (parent[key].get(value)) return Status::error(path + " is missing");
  array items;
  if (value.get_array().get(items)) return Status::error(path + " is not an array");
  return items;
}

Status read_token_ids(array items, const std::string& path, std::int64_t vocab_size,
                      std::vector<std::int32_t>& out) {
  out.reserve(items.size());
  std::size_t index = 0;
  for (element item : items) {
    std::int64_t id = 0;
    if (item.get_int64().get(id) || id < 0 || id > std::numeric_limits<std::int32_t>::max()) {
      return Status::error(path + "[" + std::to_string(index) + "] is not a token id");
    }
    if (vocab_size > 0 && id >= vocab_size) {
      return Status::error(path + "[" + std::to_string(index) + "] = " + std::to_string(id) +
                           " is outside the vocabulary (" + std::to_string(vocab_size) + ")");
    }
    out.push_back(static_cast<std::int32_t>(id));
    ++index;
  }
  return Status::ok();
}

Status read_mask(array items, std::vector<std::uint8_t>& out) {
  out.reserve(items.size());
  std::size_t index = 0;
  for (element item : items) {
    std::int64_t bit = 0;
    bool flag = false;
    if (!item.get_int64().get(bit) && (bit == 0 || bit == 1)) {
      out.push_back(static_cast<std::uint8_t>(bit));
    } else if (!item.get_bool().get(flag)) {
      out.push_back(flag ? 1 : 0);
    } else {
      return Status::error("trajectory.loss_mask[" + std::to_string(index) + "] is not 0 or 1");
    }
    ++index;
  }
  return Status::ok();
}

// Log-probabilities of model tokens must be finite and <= 0; observation tokens may hold null.
Status read_log_probs(array items, const std::vector<std::uint8_t>& mask, std::vector<float>& out) {
  if (items.size() != mask.size()) {
    return Status::error("trajectory.logprobs has " + std::to_string(items.size()) +
                         " entries for " + std::to_string(mask.size()) + " response tokens");
  }
  out.reserve(items.size());
  std::size_t index = 0;
  for (element item : items) {
    double value = 0.0;
    const bool number = !item.get_double().get(value);
    if (mask[index] == 0) {
      out.push_back(0.0F);
    } else if (!number || !std::isfinite(value) || value > 0.0) {
      return Status::error("trajectory.logprobs[" + std::to_string(index) +
                           "] is not a log-probability (a finite number <= 0)");
    } else {
      out.push_back(static_cast<float>(value));
    }
    ++index;
  }
  return Status::ok();
}

Status read_tool_calls(object trajectory, std::vector<RlToolCall>& out) {
  element turns_value;
  if (trajectory["turns"].get(turns_value)) return Status::ok();  // optional
  array turns;
  if (turns_value.get_array().get(turns)) return Status::error("trajectory.turns is not an array");
  for (element turn : turns) {
    element calls_value;
    if (turn["tool_calls"].get(calls_value) || calls_value.is_null()) continue;
    array calls;
    if (calls_value.get_array().get(calls)) {
      return Status::error("trajectory.turns[].tool_calls is not an array");
    }
    for (element call : calls) {
      RlToolCall parsed;
      std::string_view name;
      if (call["name"].get_string().get(name)) {
        return Status::error("trajectory.turns[].tool_calls[].name is missing");
      }
      parsed.name = std::string(name);
      element arguments;
      if (!call["arguments"].get(arguments)) parsed.arguments = simdjson::minify(arguments);
      bool ok = true;
      if (!call["ok"].get_bool().get(ok)) parsed.valid = ok;
      element error;
      if (!call["error"].get(error) && !error.is_null()) parsed.valid = false;
      out.push_back(std::move(parsed));
    }
  }
  return Status::ok();
}

}  // namespace

std::size_t Trajectory::trainable_tokens() const {
  std::size_t count = 0;
  for (std::uint8_t bit : loss_mask) count += bit;
  return count;
}

Result<Trajectory> read_trajectory(object record, const TrajectoryReadOptions& options) {
  Trajectory out;
  std::string_view id;
  if (!record["id"].get_string().get(id)) out.id = std::string(id);

  object trajectory;
  if (record["trajectory"].get_object().get(trajectory)) {
    return Status::error("trajectory is missing or not an object");
  }
  auto prompt = array_field(trajectory, "prompt_ids", "trajectory.prompt_ids");
  if (!prompt) return prompt.status();
  auto response = array_field(trajectory, "response_ids", "trajectory.response_ids");
  if (!response) return response.status();
  auto mask = array_field(trajectory, "loss_mask", "trajectory.loss_mask");
  if (!mask) return mask.status();
  if (auto status = read_token_ids(prompt.value(), "trajectory.prompt_ids", options.vocab_size,
                                   out.prompt_ids);
      !status) {
    return status;
  }
  if (auto status = read_token_ids(response.value(), "trajectory.response_ids", options.vocab_size,
                                   out.response_ids);
      !status) {
    return status;
  }
  if (auto status = read_mask(mask.value(), out.loss_mask); !status) return status;
  if (out.prompt_ids.empty()) return Status::error("trajectory.prompt_ids is empty");
  if (out.loss_mask.size() != out.response_ids.size()) {
    return Status::error("trajectory.loss_mask has " + std::to_string(out.loss_mask.size()) +
                         " entries for " + std::to_string(out.response_ids.size()) +
                         " response tokens");
  }
  if (out.trainable_tokens() == 0) return Status::error("trajectory has no trainable token");

  if (options.need_log_probs) {
    auto log_probs = array_field(trajectory, "logprobs", "trajectory.logprobs");
    if (!log_probs) return log_probs.status();
    if (auto status = read_log_probs(log_probs.value(), out.loss_mask, out.behaviour_log_probs);
        !status) {
      return status;
    }
  }
  std::string_view finish;
  if (!trajectory["finish_reason"].get_string().get(finish))
    out.finish_reason = std::string(finish);
  if (options.read_tool_calls) {
    if (auto status = read_tool_calls(trajectory, out.tool_calls); !status) return status;
  }
  if (options.need_reward) {
    double reward = 0.0;
    element value;
    if (record["reward"]["value"].get(value)) return Status::error("reward.value is missing");
    if (value.get_double().get(reward) || !std::isfinite(reward)) {
      return Status::error("reward.value is not a finite number");
    }
    out.reward = reward;
  }
  return out;
}

std::string rft_rejection(const Trajectory& trajectory, const RftFilter& filter) {
  if (!(trajectory.reward > filter.min_reward)) {
    char text[96];
    std::snprintf(text, sizeof text, "reward %g <= %g", trajectory.reward, filter.min_reward);
    return text;
  }
  const auto& calls = trajectory.tool_calls;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (filter.drop_invalid_calls && !calls[i].valid) {
      return "invalid tool call " + std::to_string(i) + " (" + calls[i].name + ")";
    }
  }
  if (filter.max_identical_calls > 0) {
    std::size_t run = 1;
    for (std::size_t i = 1; i < calls.size(); ++i) {
      const bool same =
          calls[i].name == calls[i - 1].name && calls[i].arguments == calls[i - 1].arguments;
      run = same ? run + 1 : 1;
      if (run >= static_cast<std::size_t>(filter.max_identical_calls)) {
        return "tool-call loop: " + std::to_string(run) + " identical consecutive calls to " +
               calls[i].name;
      }
    }
  }
  return {};
}

}  // namespace cudaagent
