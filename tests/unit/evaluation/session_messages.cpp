// The owner protocol's lines: what the driver sends, and how it reads answers, including the
// candidate's relayed words, which are bounded.
#include "cudaagent/evaluation/evaluator.h"
#include "cudaagent/evaluation/session_messages.h"

#include <doctest/doctest.h>

#include <simdjson.h>

namespace cudaagent {
namespace {

TEST_CASE("commands are one JSON object each, with what the owner needs") {
  simdjson::dom::parser parser;
  simdjson::dom::element value;
  REQUIRE_FALSE(parser.parse(owner_calls_command("candidate", "candidate", {7, 9}, 60, true, 0.25)).get(value));
  CHECK(std::string_view(value["cmd"]) == "calls");
  CHECK(std::int64_t(value["seeds"].at(1)) == 9);
  CHECK(double(value["audit_fraction"]) == 0.25);
  REQUIRE_FALSE(parser.parse(owner_init_command(1u << 30, "/s", "/w", 0.01, 0.02)).get(value));
  CHECK(std::string_view(value["socket_dir"]) == "/s");
  CHECK(double(value["rtol"]) == 0.02);
  CHECK(owner_command("exit", "") == R"({"cmd":"exit"})");
}

TEST_CASE("a calls answer reads back its calls, checks, audit marks and stop") {
  const std::string line = R"({"ok":true,"calls":[
    {"seed":5,"host_ms":0.5,"audited":true,"check":{"match":true,"failure":"none","reason":"","max_abs_error":0,
     "max_rel_error":0,"mismatched":0,"worst":"output"},"runner":{"first_call_s":{"forward":0.1}}},
    {"seed":6,"host_ms":0.4,"check":{"match":false,"failure":"values","reason":"bad","max_abs_error":2,
     "max_rel_error":1,"mismatched":3,"worst":"output"},"runner":{}},
    {"seed":7,"host_ms":0.3,"check":null,"runner":{"x":1}}],
    "stopped":{"call":2,"why":"runner error","detail":"ValueError"},"owner_ms":{"judge":1.5}})";
  auto batch = parse_owner_calls(line);
  REQUIRE(batch);
  REQUIRE(batch.value().calls.size() == 3);
  CHECK(batch.value().calls[0].audited);
  CHECK_FALSE(batch.value().calls[1].audited);
  CHECK(batch.value().calls[0].runner_json.find("first_call_s") != std::string::npos);
  CHECK(batch.value().calls[1].check->mismatched == 3);
  CHECK_FALSE(batch.value().calls[2].check.has_value());
  REQUIRE(batch.value().stopped);
  CHECK(batch.value().stopped->why == "runner error");
  CHECK(batch.value().owner_ms.at("judge") == 1.5);
  CHECK(batch.value().phases_ms.empty());  // only with the owner's --diagnostics
}

TEST_CASE("a call's window on the owner's clock is read when whole and in order") {
  auto batch = parse_owner_calls(R"({"ok":true,"calls":[
    {"seed":1,"host_ms":0.5,"start_ns":1000000000123,"end_ns":1000000500123,"check":null},
    {"seed":2,"host_ms":0.5,"start_ns":900,"end_ns":800,"check":null},
    {"seed":3,"host_ms":0.5,"start_ns":-5,"end_ns":800,"check":null},
    {"seed":4,"host_ms":0.5,"check":null}],"stopped":null,"owner_ms":{}})");
  REQUIRE(batch);
  REQUIRE(batch.value().calls.size() == 4);
  CHECK(batch.value().calls[0].start_ns == 1000000000123u);
  CHECK(batch.value().calls[0].end_ns == 1000000500123u);
  for (std::size_t k = 1; k < 4; ++k) {
    CHECK(batch.value().calls[k].start_ns == 0);
    CHECK(batch.value().calls[k].end_ns == 0);
  }
}

TEST_CASE("a runner's pid is read from its ready message, 0 when absent or out of range") {
  CHECK(ready_pid(R"({"ready":true,"pid":17})") == 17);
  CHECK(ready_pid(R"({"ready":true})") == 0);
  CHECK(ready_pid(R"({"ready":true,"pid":-3})") == 0);
  CHECK(ready_pid(R"({"ready":true,"pid":99999999999})") == 0);
  CHECK(ready_pid("not json") == 0);
}

TEST_CASE("a calls answer with diagnostics reads back its phases") {
  auto batch = parse_owner_calls(
      R"({"ok":true,"calls":[],"stopped":null,"owner_ms":{},"phases_ms":{"to_runner":0.012,"forward_gpu":0.25}})");
  REQUIRE(batch);
  CHECK(batch.value().phases_ms.size() == 2);
  CHECK(batch.value().phases_ms.at("to_runner") == 0.012);
  CHECK(batch.value().phases_ms.at("forward_gpu") == 0.25);
}

TEST_CASE("an owner's refusal is a Status with its words; garbage is a Status too") {
  auto refused = parse_owner_init(R"({"ok":false,"error":"NameError: Model"})");
  REQUIRE_FALSE(refused);
  CHECK(refused.status().message().find("NameError: Model") != std::string::npos);
  CHECK_FALSE(parse_owner_calls("not json"));
  CHECK_FALSE(parse_owner_calls(R"({"ok":true})"));
  auto info = parse_owner_init(R"({"ok":true,"input_bytes":4096,"output_bytes":1024})");
  REQUIRE(info);
  CHECK(info.value().input_bytes == 4096);
}

TEST_CASE("a runner's report is bounded: at most 64 operator names of 64 bytes") {
  std::string ops;
  for (int i = 0; i < 100; ++i) ops += (i ? "," : "") + std::string("\"op") + std::to_string(i) + std::string(100, 'x') + "\":1";
  RunnerEnd end;
  parse_runner_report(R"({"ok":true,"runner":{"forbidden_ops":{)" + ops + "}}}", end);
  CHECK(end.reported);
  CHECK(end.forbidden_ops.size() == 64);
  CHECK(end.forbidden_ops.begin()->first.size() == 64);
  CHECK(end.audit_off == 0);
  RunnerEnd none;
  parse_runner_report(R"({"ok":true,"runner":null})", none);
  CHECK_FALSE(none.reported);
  RunnerEnd off;
  parse_runner_report(R"({"ok":true,"runner":{"forbidden_ops":{},"audit_off":3,"calls":5}})", off);
  CHECK(off.reported);
  CHECK(off.audit_off == 3);
}

TEST_CASE("a runner's long account of a call is kept as text, never cut into invalid JSON") {
  const std::string error(5000, 'e');
  auto batch = parse_owner_calls(R"({"ok":true,"calls":[{"host_ms":1,"runner":{"ok":false,"error":")" + error +
                                 R"("}}]})");
  REQUIRE(batch);
  REQUIRE(batch.value().calls.size() == 1);
  const std::string& json = batch.value().calls[0].runner_json;
  simdjson::dom::parser parser;
  simdjson::dom::element parsed;
  REQUIRE_FALSE(parser.parse(json).get(parsed));
  CHECK(int64_t(parsed["cut_at_bytes"]) == 2000);
  CHECK(std::string_view(parsed["text"]).size() == 2000);
  auto short_one = parse_owner_calls(R"({"ok":true,"calls":[{"host_ms":1,"runner":{"ok":true}}]})");
  REQUIRE(short_one);
  CHECK(short_one.value().calls[0].runner_json == R"({"ok":true})");
}

}  // namespace
}  // namespace cudaagent

TEST_CASE("forwards per call: as asked, cut so one runner's slots fit 4 GiB, never below 1") {
  constexpr double kMiB = 1 << 20;
  CHECK(cudaagent::forwards_for_task(8, 64 * kMiB, 64 * kMiB) == 8);
  CHECK(cudaagent::forwards_for_task(64, 64 * kMiB, 64 * kMiB) == 32);   // 32 x 128 MiB = 4 GiB
  CHECK(cudaagent::forwards_for_task(64, 512 * kMiB, 256 * kMiB) == 5);  // 5 x 768 MiB < 4 GiB
  CHECK(cudaagent::forwards_for_task(8, 3000 * kMiB, 3000 * kMiB) == 1);  // one slot over budget
  CHECK(cudaagent::forwards_for_task(1, 0, 0) == 1);
  CHECK(cudaagent::forwards_for_task(64, 0, 0) == 64);
}

TEST_CASE("owner_attach_command carries the arm's forwards per call") {
  simdjson::dom::parser parser;
  const std::string command = cudaagent::owner_attach_command("candidate", "t0k", 30, 5);
  simdjson::dom::element parsed = parser.parse(command);
  CHECK(std::int64_t(parsed["forwards"]) == 5);
  CHECK(std::string_view(parsed["arm"]) == "candidate");
}

TEST_CASE("an evaluator refuses a forward sync other than each or call, before it starts anything") {
  cudaagent::EvaluationSettings settings;
  settings.forward_sync = "sometimes";
  auto evaluator = cudaagent::Evaluator::create(settings, cudaagent::TorchEnv{});
  REQUIRE_FALSE(evaluator);
  CHECK(evaluator.status().message().find("forward sync") != std::string::npos);
}

TEST_CASE("an evaluator refuses an unknown call timer, and the GPU timer on the CPU") {
  cudaagent::EvaluationSettings settings;
  settings.call_timer = "wall";
  auto unknown = cudaagent::Evaluator::create(settings, cudaagent::TorchEnv{});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.status().message().find("call timer") != std::string::npos);
  settings.call_timer = "gpu";
  settings.device = "cpu";
  auto on_cpu = cudaagent::Evaluator::create(settings, cudaagent::TorchEnv{});
  REQUIRE_FALSE(on_cpu);
  CHECK(on_cpu.status().message().find("cuda device") != std::string::npos);
  settings.device = "cuda";
  settings.call_timer = "host";
  settings.call_lead_us = 100;
  auto lead_on_host = cudaagent::Evaluator::create(settings, cudaagent::TorchEnv{});
  REQUIRE_FALSE(lead_on_host);
  CHECK(lead_on_host.status().message().find("GPU call timer") != std::string::npos);
  settings.call_timer = "gpu";
  settings.call_lead_us = -1;
  auto negative = cudaagent::Evaluator::create(settings, cudaagent::TorchEnv{});
  REQUIRE_FALSE(negative);
  CHECK(negative.status().message().find("call lead") != std::string::npos);
}

TEST_CASE("the auto call timer is the GPU's on cuda and the host's on the CPU") {
  CHECK(cudaagent::resolve_call_timer("auto", "cuda").value() == "gpu");
  CHECK(cudaagent::resolve_call_timer("auto", "cpu").value() == "host");
  CHECK(cudaagent::resolve_call_timer("host", "cuda").value() == "host");
  CHECK(cudaagent::resolve_call_timer("gpu", "cuda").value() == "gpu");
  auto unknown = cudaagent::resolve_call_timer("wall", "cuda");
  REQUIRE_FALSE(unknown);
  CHECK(unknown.status().message().find("auto, host or gpu") != std::string::npos);
}

TEST_CASE("the auto forward sync is call only where the trace watches one forward per call on cuda") {
  CHECK(cudaagent::resolve_forward_sync("auto", "cuda", 1, true).value() == "call");
  CHECK(cudaagent::resolve_forward_sync("auto", "cuda", 1, false).value() == "each");  // nothing watches
  CHECK(cudaagent::resolve_forward_sync("auto", "cuda", 4, true).value() == "each");   // forwards unordered
  CHECK(cudaagent::resolve_forward_sync("auto", "cpu", 1, true).value() == "each");
  CHECK(cudaagent::resolve_forward_sync("call", "cpu", 1, false).value() == "call");  // a set value stays
  CHECK(cudaagent::resolve_forward_sync("each", "cuda", 1, true).value() == "each");
  auto unknown = cudaagent::resolve_forward_sync("sometimes", "cuda", 1, true);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.status().message().find("auto, each or call") != std::string::npos);
}

TEST_CASE("the auto call lead pauses only for the GPU timer with one wait per call") {
  using cudaagent::kAutoCallLead;
  CHECK(cudaagent::resolve_call_lead_us(kAutoCallLead, "gpu", "call") == cudaagent::kCallLeadUs);
  CHECK(cudaagent::resolve_call_lead_us(kAutoCallLead, "gpu", "each") == 0);
  CHECK(cudaagent::resolve_call_lead_us(kAutoCallLead, "host", "call") == 0);
  CHECK(cudaagent::resolve_call_lead_us(0, "gpu", "call") == 0);  // asked for none: none
  CHECK(cudaagent::resolve_call_lead_us(250, "gpu", "each") == 250);
}

TEST_CASE("the call timing resolves in place, the lead after the timer and sync it depends on") {
  std::string timer = "auto", sync = "auto";
  double lead = cudaagent::kAutoCallLead;
  REQUIRE(cudaagent::resolve_call_timing("cuda", 1, true, timer, sync, lead));
  CHECK(timer == "gpu");
  CHECK(sync == "call");
  CHECK(lead == cudaagent::kCallLeadUs);
  timer = "auto", sync = "auto", lead = cudaagent::kAutoCallLead;
  REQUIRE(cudaagent::resolve_call_timing("cpu", 1, true, timer, sync, lead));
  CHECK(timer == "host");
  CHECK(sync == "each");
  CHECK(lead == 0);
  timer = "wall", sync = "auto";  // an error leaves the settings as they were
  CHECK_FALSE(cudaagent::resolve_call_timing("cuda", 1, true, timer, sync, lead));
  CHECK(timer == "wall");
  CHECK(sync == "auto");
}

TEST_CASE("a call's sample is the GPU window where the owner timed one, else the host clock") {
  auto batch = cudaagent::parse_owner_calls(R"({"ok":true,"calls":[
    {"seed":1,"host_ms":0.9,"gpu_ms":0.31,"check":null},
    {"seed":2,"host_ms":0.8,"check":null},
    {"seed":3,"host_ms":0.7,"gpu_ms":-1,"check":null}],"stopped":null})");
  REQUIRE(batch);
  REQUIRE(batch.value().calls.size() == 3);
  CHECK(batch.value().calls[0].sample_ms() == doctest::Approx(0.31));
  CHECK(batch.value().calls[0].host_ms == doctest::Approx(0.9));
  CHECK(batch.value().calls[1].sample_ms() == doctest::Approx(0.8));
  CHECK_FALSE(batch.value().calls[2].gpu_ms);  // not a time: the host clock stands
  CHECK(batch.value().calls[2].sample_ms() == doctest::Approx(0.7));
}
