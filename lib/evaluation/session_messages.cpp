// Builders and readers of the session owner's protocol (session_messages.h).
#include "cudaagent/evaluation/session_messages.h"

#include <cmath>

#include <simdjson.h>

#include "cudaagent/base/json_writer.h"

namespace cudaagent {
namespace {

Status owner_error(simdjson::dom::element reply, const std::string& what) {
  std::string_view error;
  if (reply["error"].get(error)) error = "no reason given";
  return Status::error(what + ": " + std::string(error.substr(0, 2000)));
}

Result<simdjson::dom::element> parse_ok(simdjson::dom::parser& parser, const std::string& line,
                                        const std::string& what) {
  simdjson::dom::element reply;
  if (parser.parse(line).get(reply) || !reply.is_object()) {
    return Status::error(what + ": the owner answered something that is not a JSON object");
  }
  bool ok = false;
  if (reply["ok"].get(ok) || !ok) return owner_error(reply, what);
  return reply;
}

double number_or(simdjson::dom::element value, double fallback) {
  double number = 0;
  if (!value.get(number)) return number;
  std::int64_t integer = 0;
  if (!value.get(integer)) return static_cast<double>(integer);
  return fallback;
}

}  // namespace

std::string owner_command(const std::string& cmd, const std::string& arm) {
  std::string out;
  JsonWriter json(out);
  json.begin_object().field("cmd", cmd);
  if (!arm.empty()) json.field("arm", arm);
  json.end_object();
  return out;
}

std::string owner_init_command(std::uint64_t seed, const std::string& socket_dir,
                               const std::string& state_dir, double atol, double rtol) {
  std::string out;
  JsonWriter json(out);
  json.begin_object().field("cmd", "init").field("seed", static_cast<std::int64_t>(seed));
  json.field("socket_dir", socket_dir).field("state_dir", state_dir);
  json.field("atol", atol).field("rtol", rtol).end_object();
  return out;
}

std::string owner_attach_command(const std::string& arm, const std::string& token, double timeout_seconds,
                                 int forwards) {
  std::string out;
  JsonWriter json(out);
  json.begin_object().field("cmd", "attach").field("arm", arm).field("token", token);
  json.field("timeout_s", timeout_seconds).field("forwards", forwards).end_object();
  return out;
}

std::string owner_calls_command(const std::string& arm, const std::string& model,
                                const std::vector<std::uint64_t>& seeds, double timeout_seconds, bool flush,
                                double audit_fraction) {
  std::string out;
  JsonWriter json(out);
  json.begin_object().field("cmd", "calls").field("arm", arm).field("model", model);
  json.key("seeds").begin_array();
  for (std::uint64_t seed : seeds) json.value(static_cast<std::int64_t>(seed));
  json.end_array().field("timeout_s", timeout_seconds).field("flush", flush);
  json.field("audit_fraction", audit_fraction).end_object();
  return out;
}

Result<TaskInfo> parse_owner_init(const std::string& line) {
  simdjson::dom::parser parser;
  auto reply = parse_ok(parser, line, "the task");
  if (!reply) return reply.status();
  TaskInfo info;
  info.layout_json = line;
  info.input_bytes = number_or(reply.value()["input_bytes"], 0);
  info.output_bytes = number_or(reply.value()["output_bytes"], 0);
  return info;
}

Result<std::string> parse_owner_attach(const std::string& line) {
  simdjson::dom::parser parser;
  auto reply = parse_ok(parser, line, "the runner could not attach");
  if (!reply) return reply.status();
  simdjson::dom::object runner;
  if (reply.value()["runner"].get_object().get(runner)) return std::string("{}");
  return std::string(simdjson::minify(runner));
}

std::vector<std::string> ready_sandbox_layers(const std::string& ready_json) {
  std::vector<std::string> layers;
  simdjson::dom::parser parser;
  simdjson::dom::element ready;
  simdjson::dom::array list;
  if (parser.parse(ready_json).get(ready) || ready["sandbox_layers"].get_array().get(list)) return layers;
  for (auto item : list) {
    std::string_view text;
    if (layers.size() < 16 && !item.get_string().get(text)) layers.emplace_back(text.substr(0, 64));
  }
  return layers;
}

std::uint32_t ready_pid(const std::string& ready_json) {
  simdjson::dom::parser parser;
  simdjson::dom::element ready;
  std::uint64_t pid = 0;
  if (parser.parse(ready_json).get(ready) || ready["pid"].get_uint64().get(pid) || pid > 0xFFFFFFFFu) return 0;
  return static_cast<std::uint32_t>(pid);
}

Result<CallBatch> parse_owner_calls(const std::string& line) {
  simdjson::dom::parser parser;
  auto reply = parse_ok(parser, line, "the calls failed");
  if (!reply) return reply.status();
  CallBatch batch;
  simdjson::dom::array calls;
  if (reply.value()["calls"].get_array().get(calls)) {
    return Status::error("the owner's answer to calls has no list of calls");
  }
  for (auto item : calls) {
    CallResult call;
    std::int64_t seed = 0;
    if (!item["seed"].get(seed)) call.seed = static_cast<std::uint64_t>(seed);
    call.host_ms = number_or(item["host_ms"], 0);
    if (double gpu_ms = 0; !item["gpu_ms"].get(gpu_ms) && std::isfinite(gpu_ms) && gpu_ms >= 0) call.gpu_ms = gpu_ms;
    bool audited = false;
    if (!item["audited"].get(audited)) call.audited = audited;
    std::uint64_t start_ns = 0, end_ns = 0;
    if (!item["start_ns"].get_uint64().get(start_ns) && !item["end_ns"].get_uint64().get(end_ns) &&
        end_ns >= start_ns) {
      call.start_ns = start_ns, call.end_ns = end_ns;
    }
    simdjson::dom::object runner;
    if (!item["runner"].get_object().get(runner) && runner.size() > 0) {
      // Kept whole or not at all: a cut would leave text that is not JSON in the record. A longer
      // account (a candidate's long error message) is kept as the text's first 2,000 bytes.
      std::string text = simdjson::minify(runner);
      if (text.size() <= 2000) {
        call.runner_json = std::move(text);
      } else {
        JsonWriter out(call.runner_json);
        out.begin_object().field("cut_at_bytes", std::int64_t{2000});
        out.field("text", std::string_view(text).substr(0, 2000)).end_object();
      }
    }
    simdjson::dom::object check;
    if (!item["check"].get_object().get(check)) {
      CallCheck c;
      bool match = false;
      std::string_view text;
      if (!check["match"].get(match)) c.match = match;
      if (!check["failure"].get(text)) c.failure = std::string(text.substr(0, 64));
      if (!check["reason"].get(text)) c.reason = std::string(text.substr(0, 2000));
      if (!check["worst"].get(text)) c.worst = std::string(text.substr(0, 200));
      c.max_abs_error = number_or(check["max_abs_error"], 0);
      c.max_rel_error = number_or(check["max_rel_error"], 0);
      c.mismatched = static_cast<std::int64_t>(number_or(check["mismatched"], 0));
      call.check = c;
    }
    batch.calls.push_back(call);
  }
  simdjson::dom::object owner_ms;
  if (!reply.value()["owner_ms"].get_object().get(owner_ms)) {
    for (auto field : owner_ms) {
      if (batch.owner_ms.size() < 16) batch.owner_ms[std::string(field.key.substr(0, 32))] = number_or(field.value, 0);
    }
  }
  simdjson::dom::object phases_ms;
  if (!reply.value()["phases_ms"].get_object().get(phases_ms)) {
    for (auto field : phases_ms) {
      if (batch.phases_ms.size() < 32) batch.phases_ms[std::string(field.key.substr(0, 32))] = number_or(field.value, 0);
    }
  }
  simdjson::dom::object stopped;
  if (!reply.value()["stopped"].get_object().get(stopped)) {
    CallStop stop;
    std::string_view text;
    stop.call = static_cast<std::size_t>(number_or(stopped["call"], 0));
    if (!stopped["why"].get(text)) stop.why = std::string(text.substr(0, 64));
    if (!stopped["detail"].get(text)) stop.detail = std::string(text.substr(0, 2000));
    batch.stopped = stop;
  }
  return batch;
}

void parse_runner_report(const std::string& line, RunnerEnd& end) {
  simdjson::dom::parser parser;
  simdjson::dom::element reply;
  simdjson::dom::object runner, ops;
  if (parser.parse(line).get(reply) || reply["runner"].get_object().get(runner)) return;
  end.reported = true;
  if (std::int64_t off = 0; !runner["audit_off"].get_int64().get(off) && off > 0) end.audit_off = off;
  if (runner["forbidden_ops"].get_object().get(ops)) return;
  for (auto field : ops) {
    if (end.forbidden_ops.size() >= 64) break;
    end.forbidden_ops[std::string(field.key.substr(0, 64))] =
        static_cast<std::int64_t>(number_or(field.value, 0));
  }
}

}  // namespace cudaagent
