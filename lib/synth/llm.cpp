// Prompts and replies of the LLM mode. The prompt lists each operator with the rank it accepts
// and the parameters a proposal may fix; the reply is searched for the first JSON value, since
// models wrap JSON in prose and code fences whatever they are told.
#include "cudaagent/synth/llm.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>

#include "cudaagent/base/json_writer.h"

namespace cudaagent::synth {
namespace {

std::string percent(double fraction) {
  return std::to_string(static_cast<int>(std::lround(fraction * 100))) + "%";
}

std::string system_prompt(const Catalog& catalog, const std::vector<int>& allowed) {
  std::string text =
      "You design benchmark tasks for people who write fused CUDA kernels. A task is a chain of "
      "PyTorch operators applied one after another to one input tensor; dimension 0 is always the "
      "batch. The output of each operator must be a valid input of the next: each operator below "
      "says which tensor rank it accepts, and ranks change only where an operator says so "
      "(reductions, flatten, pooling keep or drop dims as in PyTorch). Sizes are chosen for you. "
      "Use only operator names from this catalog. A composition is a JSON list whose items are "
      "operator names, or objects {\"op\": name, \"params\": {parameter: value}} to fix one of the "
      "parameters listed for that operator. Prefer chains that occur in real models and that a "
      "kernel writer could fuse, such as a convolution followed by a normalisation and an "
      "activation, or a projection followed by an activation and a reduction.\n\nOperators "
      "(name [family] accepted rank: description; parameters you may fix):\n";
  for (int index : allowed) {
    const OpEntry& e = catalog.ops[static_cast<std::size_t>(index)];
    text += "- " + e.name + " [" + e.family + "] rank " +
            (e.rank != 0 ? std::to_string(e.rank) : ">=" + std::to_string(e.min_rank)) + ": " + e.doc;
    std::string params;
    for (const ParamSpec& p : e.params) {
      if (p.kind != ParamSpec::Kind::kDerived) params += (params.empty() ? "" : ", ") + p.name;
    }
    if (!params.empty()) text += "; " + params;
    if (e.terminal) text += " (last operator only)";
    text += "\n";
  }
  return text;
}

std::string user_prompt(int count, const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += w;
  std::string mix;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    mix += (mix.empty() ? "" : ", ") + std::to_string(i + 1) + " operator" + (i ? "s" : "") + ": " +
           percent(weights[i] / total);
  }
  return "Propose " + std::to_string(count) +
         " different compositions. Mix of lengths: " + mix +
         ". Answer with JSON only, in this form: {\"compositions\": [[\"conv2d\", \"batch_norm2d\", "
         "\"relu\"], [\"linear\", {\"op\": \"leaky_relu\", \"params\": {\"negative_slope\": 0.1}}]]}";
}

// The first JSON object or array in `text` that parses: from the first '{' or '[' to the last
// matching closing bracket, trying later closing brackets first.
bool find_json(std::string_view text, simdjson::dom::parser& parser, simdjson::dom::element& out) {
  const std::size_t start = text.find_first_of("{[");
  if (start == std::string_view::npos) return false;
  const char close = text[start] == '{' ? '}' : ']';
  for (std::size_t end = text.rfind(close); end != std::string_view::npos && end > start;
       end = text.rfind(close, end - 1)) {
    simdjson::padded_string candidate(text.substr(start, end - start + 1));
    if (!parser.parse(candidate).get(out)) return true;
  }
  return false;
}

Status read_override(std::string_view name, simdjson::dom::element value, ParamOverride& o) {
  o.name = std::string(name);
  double number = 0;
  std::int64_t integer = 0;
  bool flag = false;
  std::string_view text;
  if (!value.get(number)) {
    o.number = number;
  } else if (!value.get(integer)) {
    o.number = static_cast<double>(integer);
  } else if (!value.get(flag)) {
    o.number = flag ? 1 : 0;
  } else if (!value.get(text)) {
    o.text = std::string(text);
    o.is_text = true;
  } else {
    return Status::error("parameter '" + std::string(name) + "' must be a number, boolean or string");
  }
  return Status::ok();
}

Proposal read_proposal(simdjson::dom::element item, const Catalog& catalog,
                       const std::vector<int>& allowed) {
  Proposal proposal;
  proposal.raw = simdjson::minify(item);
  simdjson::dom::array ops;
  simdjson::dom::object wrapper;
  if (!item.get(wrapper)) {
    if (wrapper["ops"].get(ops)) {
      proposal.error = "a composition is a list of operators or {\"ops\": [...]}";
      return proposal;
    }
  } else if (item.get(ops)) {
    proposal.error = "a composition is a list of operators or {\"ops\": [...]}";
    return proposal;
  }
  if (ops.size() == 0) {
    proposal.error = "the composition is empty";
    return proposal;
  }
  std::size_t position = 0;
  for (simdjson::dom::element op : ops) {
    ++position;
    std::string_view name;
    simdjson::dom::object spec;
    OpRequest request;
    if (!op.get(spec)) {
      if (spec["op"].get(name)) {
        proposal.error = "operator " + std::to_string(position) + " has no \"op\" name";
        return proposal;
      }
      simdjson::dom::object params;
      if (auto v = spec["params"]; v.error() != simdjson::NO_SUCH_FIELD) {
        if (v.get(params)) {
          proposal.error = "operator " + std::to_string(position) + ": \"params\" must be an object";
          return proposal;
        }
        for (auto [key, value] : params) {
          ParamOverride o;
          if (auto s = read_override(key, value, o); !s) {
            proposal.error = "operator " + std::to_string(position) + ": " + s.message();
            return proposal;
          }
          request.params.push_back(std::move(o));
        }
      }
    } else if (op.get(name)) {
      proposal.error = "operator " + std::to_string(position) + " is neither a name nor an object";
      return proposal;
    }
    auto found = catalog.find(name);
    if (!found) {
      proposal.error = "unknown operator '" + std::string(name) + "'";
      return proposal;
    }
    if (std::find(allowed.begin(), allowed.end(), *found) == allowed.end()) {
      proposal.error = "operator '" + std::string(name) + "' is not among the allowed operators";
      return proposal;
    }
    request.entry = *found;
    proposal.chain.push_back(std::move(request));
  }
  return proposal;
}

}  // namespace

std::string chat_completions_url(std::string_view endpoint) {
  std::string url(endpoint);
  while (!url.empty() && url.back() == '/') url.pop_back();
  const std::string_view suffix = "/chat/completions";
  if (url.size() >= suffix.size() && url.compare(url.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return url;
  }
  if (url.size() >= 3 && url.compare(url.size() - 3, 3, "/v1") == 0) return url + std::string(suffix);
  return url + "/v1" + std::string(suffix);
}

std::string proposal_request_body(const Catalog& catalog, const std::vector<int>& allowed,
                                  const LlmSettings& settings,
                                  const std::vector<double>& depth_weights, std::uint64_t seed) {
  std::string body;
  JsonWriter w(body);
  w.begin_object().field("model", settings.model).key("messages").begin_array();
  w.begin_object().field("role", "system").field("content", system_prompt(catalog, allowed)).end_object();
  w.begin_object().field("role", "user").field("content", user_prompt(settings.per_request, depth_weights)).end_object();
  w.end_array();
  w.field("temperature", settings.temperature);
  w.field("max_tokens", settings.max_tokens);
  w.field("seed", static_cast<std::int64_t>(seed & 0x7fffffffffffffffull));
  w.end_object();
  return body;
}

Result<std::string> chat_completion_content(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::padded_string padded(body);
  if (auto error = parser.parse(padded).get(root)) {
    std::string prefix(body.substr(0, 80));
    std::replace(prefix.begin(), prefix.end(), '\n', ' ');
    return Status::error(std::string("response is not JSON (") + simdjson::error_message(error) +
                         "): '" + prefix + "'");
  }
  std::string_view content;
  simdjson::dom::array choices;
  if (root["choices"].get(choices) || choices.size() == 0) {
    simdjson::dom::object error_object;
    std::string_view message;
    if (!root["error"].get(error_object) && !error_object["message"].get(message)) {
      return Status::error("server error: " + std::string(message));
    }
    return Status::error("response is not a chat completion: no choices");
  }
  if (choices.at(0)["message"]["content"].get(content)) {
    return Status::error("response is not a chat completion: no choices[0].message.content");
  }
  return std::string(content);
}

Result<std::vector<Proposal>> parse_proposals(std::string_view content, const Catalog& catalog,
                                              const std::vector<int>& allowed) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (!find_json(content, parser, root)) return Status::error("the reply holds no JSON");
  simdjson::dom::array list;
  simdjson::dom::object obj;
  if (!root.get(obj)) {
    if (obj["compositions"].get(list)) {
      return Status::error("the reply's JSON has no \"compositions\" list");
    }
  } else if (root.get(list)) {
    return Status::error("the reply's JSON is not a list of compositions");
  }
  std::vector<Proposal> out;
  for (simdjson::dom::element item : list) out.push_back(read_proposal(item, catalog, allowed));
  if (out.empty()) return Status::error("the reply's list of compositions is empty");
  return out;
}

}  // namespace cudaagent::synth
