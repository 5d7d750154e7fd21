// The token ledger. The flat arrays grow turn by turn while every id is known; the first turn
// without ids empties them for good (the status says why), and the per-turn ids stay for the
// record's segments.
#include "cudaagent/rollout/token_ledger.h"

#include <cmath>
#include <limits>

#include "cudaagent/llm/token_array.h"

namespace cudaagent::rollout {
namespace {

std::size_t common_prefix(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

void write_ids(JsonWriter& json, const std::vector<std::int32_t>& ids, bool base64) {
  if (base64) {
    json.value(llm::encode_u32_base64(ids));
    return;
  }
  json.begin_array();
  for (std::int32_t id : ids) json.value(static_cast<std::int64_t>(id));
  json.end_array();
}

void write_floats(JsonWriter& json, const std::vector<float>& values, bool base64) {
  if (base64) {
    json.value(llm::encode_f32_base64(values));
    return;
  }
  json.begin_array();
  for (float value : values) json.value(static_cast<double>(value));  // NaN is written as null
  json.end_array();
}

void write_mask(JsonWriter& json, const std::vector<std::uint8_t>& mask, bool base64) {
  if (base64) {
    json.value(llm::encode_u8_base64(mask));
    return;
  }
  json.begin_array();
  for (std::uint8_t bit : mask) json.value(static_cast<std::int64_t>(bit));
  json.end_array();
}

}  // namespace

const char* token_status_name(TokenStatus status) {
  switch (status) {
    case TokenStatus::kExact: return "exact";
    case TokenStatus::kDrift: return "drift";
    case TokenStatus::kObservationsMissing: return "observations_missing";
    case TokenStatus::kTextOnly: return "text_only";
  }
  return "text_only";
}

void TokenLedger::add_turn(const llm::ChatReply& reply, std::size_t observation_begin,
                           std::size_t observation_end, std::size_t reply_message) {
  Turn turn;
  turn.observation_begin = observation_begin;
  turn.observation_end = observation_end;
  turn.reply_message = reply_message;
  turn.reply_ids = reply.token_ids;
  const std::size_t reply_count = reply.token_ids ? reply.token_ids->size() : 0;
  turn.logprobs_known = reply.logprobs && reply.logprobs->size() == reply_count && reply_count > 0;
  turn.logprobs = turn.logprobs_known
                      ? *reply.logprobs
                      : std::vector<float>(reply_count, std::numeric_limits<float>::quiet_NaN());
  all_replies_ = all_replies_ && reply.token_ids.has_value();
  all_prompts_ = all_prompts_ && reply.prompt_token_ids.has_value();
  if (reply.prompt_token_ids) {
    const auto& prompt = *reply.prompt_token_ids;
    const std::size_t reused = turns_.empty() ? 0 : common_prefix(current_, prompt);
    if (!turns_.empty() && reused < current_.size()) drift_ = true;
    turn.prompt_reused = reused;
    turn.prompt_added.assign(prompt.begin() + static_cast<std::ptrdiff_t>(reused), prompt.end());
    current_ = prompt;
    if (reply.token_ids) current_.insert(current_.end(), reply.token_ids->begin(), reply.token_ids->end());
  }
  if (reply.prompt_token_ids && reply.token_ids) {
    context_tokens_ = static_cast<std::int64_t>(reply.prompt_token_ids->size() + reply.token_ids->size());
  } else if (reply.prompt_tokens || reply.completion_tokens) {
    context_tokens_ = reply.prompt_tokens.value_or(0) + reply.completion_tokens.value_or(0);
  }
  if (all_prompts_ && all_replies_) {
    if (turns_.empty()) {
      prompt_ids_ = turn.prompt_added;
    } else {
      response_ids_.insert(response_ids_.end(), turn.prompt_added.begin(), turn.prompt_added.end());
      mask_.insert(mask_.end(), turn.prompt_added.size(), 0);
      logprobs_.insert(logprobs_.end(), turn.prompt_added.size(), 0.0f);
    }
    response_ids_.insert(response_ids_.end(), turn.reply_ids->begin(), turn.reply_ids->end());
    mask_.insert(mask_.end(), reply_count, 1);
    logprobs_.insert(logprobs_.end(), turn.logprobs.begin(), turn.logprobs.end());
  } else {
    prompt_ids_.clear();
    response_ids_.clear();
    mask_.clear();
    logprobs_.clear();
  }
  turns_.push_back(std::move(turn));
}

TokenStatus TokenLedger::status() const {
  if (!all_replies_ || turns_.empty()) return TokenStatus::kTextOnly;
  if (!all_prompts_) return TokenStatus::kObservationsMissing;
  return drift_ ? TokenStatus::kDrift : TokenStatus::kExact;
}

void TokenLedger::write_json(JsonWriter& json, bool base64) const {
  const TokenStatus state = status();
  const bool flat = state == TokenStatus::kExact || state == TokenStatus::kDrift;
  json.begin_object().field("status", token_status_name(state));
  json.field("encoding", base64 ? "base64-le32" : "json");
  json.field("prompt_count", static_cast<std::int64_t>(prompt_ids_.size()));
  json.field("response_count", static_cast<std::int64_t>(response_ids_.size()));
  json.key("prompt_ids");
  flat ? write_ids(json, prompt_ids_, base64) : (void)json.null();
  json.key("response_ids");
  flat ? write_ids(json, response_ids_, base64) : (void)json.null();
  json.key("loss_mask");
  flat ? write_mask(json, mask_, base64) : (void)json.null();
  json.key("logprobs");
  flat ? write_floats(json, logprobs_, base64) : (void)json.null();
  // The sequence in order: the prompt, then per turn the observation it added and the reply.
  json.key("segments").begin_array();
  std::size_t at = 0;  // position in response_ids
  for (std::size_t t = 0; t < turns_.size(); ++t) {
    const Turn& turn = turns_[t];
    json.begin_object()
        .field("kind", t == 0 ? "prompt" : "observation")
        .field("turn", static_cast<std::int64_t>(t));
    json.key("messages").begin_array().value(static_cast<std::int64_t>(turn.observation_begin));
    json.value(static_cast<std::int64_t>(turn.observation_end)).end_array();
    if (flat) {
      const std::size_t length = turn.prompt_added.size();
      json.field("start", static_cast<std::int64_t>(t == 0 ? 0 : at));
      json.field("length", static_cast<std::int64_t>(length));
      if (t > 0) at += length;
    }
    json.end_object();
    json.begin_object().field("kind", "model").field("turn", static_cast<std::int64_t>(t));
    json.key("messages").begin_array().value(static_cast<std::int64_t>(turn.reply_message));
    json.value(static_cast<std::int64_t>(turn.reply_message + 1)).end_array();
    if (flat) {
      json.field("start", static_cast<std::int64_t>(at))
          .field("length", static_cast<std::int64_t>(turn.reply_ids->size()));
      at += turn.reply_ids->size();
    } else if (turn.reply_ids) {
      json.key("ids");
      write_ids(json, *turn.reply_ids, base64);
      json.key("logprobs");
      write_floats(json, turn.logprobs, base64);
    }
    json.end_object();
  }
  json.end_array();
  // Each turn's exact prompt: the previous turn's prompt + reply cut to prompt_reused, then the
  // ids the segment before the turn's reply holds. Equal to the flat sequence when status is exact.
  json.key("turns").begin_array();
  for (const Turn& turn : turns_) {
    json.begin_object();
    json.key("prompt_reused");
    turn.prompt_reused ? (void)json.value(static_cast<std::int64_t>(*turn.prompt_reused)) : (void)json.null();
    json.field("prompt_added", static_cast<std::int64_t>(turn.prompt_added.size()));
    json.field("reply", static_cast<std::int64_t>(turn.reply_ids ? turn.reply_ids->size() : 0));
    json.field("logprobs", turn.logprobs_known).end_object();
  }
  json.end_array().end_object();
}

}  // namespace cudaagent::rollout
