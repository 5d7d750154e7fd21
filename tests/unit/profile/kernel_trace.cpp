// Tests of the kernel-trace reader and window summaries on synthetic traces: hostile lines and
// caps, busy time with streams that overlap, launcher classes and the name fallback, losses.
#include "cudaagent/profile/kernel_trace.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "test_support.h"

using namespace cudaagent;
using cudaagent::testing::TempDir;
using cudaagent::testing::write_file;

namespace {

// One kernel line; launcher "" writes null.
std::string kernel(const std::string& name, std::uint32_t stream, std::uint64_t start, std::uint64_t end,
                   const std::string& launcher = "", std::uint32_t tid = 0) {
  return R"({"kind":"kernel","name":")" + name + R"(","demangled":"","device":0,"context":1,"stream":)" +
         std::to_string(stream) + R"(,"correlation":7,"start_ns":)" + std::to_string(start) +
         R"(,"end_ns":)" + std::to_string(end) +
         R"(,"grid":[1,2,3],"block":[128,1,1],"shared_bytes":0,"registers":16,"graph":0,"launcher":)" +
         (launcher.empty() ? std::string("null") : "\"" + launcher + "\"") +
         R"(,"tid":)" + (tid == 0 ? std::string("null") : std::to_string(tid)) + "}\n";
}

std::string summary_line(std::uint64_t pid, std::uint64_t flush, std::uint64_t kernels, std::uint64_t dropped = 0) {
  return R"({"kind":"summary","pid":)" + std::to_string(pid) + R"(,"flush":)" + std::to_string(flush) +
         R"(,"records":{"kernel":)" + std::to_string(kernels) +
         R"(,"memcpy":0,"memset":0,"other":0},"dropped":)" + std::to_string(dropped) +
         R"(,"buffer_errors":0,"write_failures":0,"launches":3,"unknown_launchers":0,"unresolved_walks":0,)"
         R"("provenance":true,"clock":"monotonic","cupti_version":130001,"cupti_header_version":130001,)"
         R"("callbacks":200,"cupti_library":"/x/libcupti.so.13"})" "\n";
}

TraceSummary summarize(const KernelTrace& trace, TraceWindow window, SummarySettings settings = {}) {
  auto result = summarize_trace(trace, window, settings);
  REQUIRE_MESSAGE(result, result.status().message());
  return result.value();
}

const ClassShare& share(const TraceSummary& s, LauncherClass c) { return s.classes[static_cast<int>(c)]; }

}  // namespace

TEST_CASE("kernel trace: every line kind is read with its fields") {
  const std::string text =
      kernel("_Z3addPf", 7, 100, 250, "/ws/build/ext.so", 4242) +
      R"({"kind":"memcpy","copy":"HtoD","bytes":4096,"device":0,"context":1,"stream":13,"correlation":8,"start_ns":300,"end_ns":310,"graph":0,"launcher":"/usr/lib/libtorch_cuda.so","tid":1})" "\n"
      R"({"kind":"memset","bytes":64,"device":0,"context":1,"stream":13,"correlation":9,"start_ns":320,"end_ns":321,"graph":0,"launcher":null,"tid":null})" "\n"
      R"({"kind":"error","pid":5,"message":"cuptiSubscribe: CUPTI_ERROR_UNKNOWN"})" "\n"
      R"({"kind":"mark","pid":5,"correlation":9,"stream":13,"at_ns":330})" "\n" +
      summary_line(5, 1, 1, 0);
  const KernelTrace trace = parse_kernel_trace(text);
  CHECK(trace.rejected == 0);
  CHECK(trace.lines == 6);
  REQUIRE(trace.marks.size() == 1);
  CHECK(trace.marks[0].pid == 5);
  CHECK(trace.marks[0].correlation == 9);
  CHECK(trace.marks[0].stream == 13);
  CHECK(trace.marks[0].at_ns == 330);
  CHECK(trace.marks[0].line == 5);
  REQUIRE(trace.activities.size() == 3);
  const TraceActivity& k = trace.activities[0];
  CHECK(k.kind == TraceKind::kernel);
  CHECK(trace.names[k.name] == "_Z3addPf");
  CHECK(k.stream == 7);
  CHECK(k.start_ns == 100);
  CHECK(k.end_ns == 250);
  CHECK(k.grid == std::array<std::int64_t, 3>{1, 2, 3});
  CHECK(k.block == std::array<std::int64_t, 3>{128, 1, 1});
  CHECK(k.tid == 4242);
  CHECK(trace.launchers[k.launcher] == "/ws/build/ext.so");
  CHECK(trace.names[trace.activities[1].name] == "[memcpy HtoD]");
  CHECK(trace.activities[1].bytes == 4096);
  CHECK(trace.activities[2].kind == TraceKind::memset);
  CHECK(trace.activities[2].launcher == kNoLauncher);
  CHECK(trace.activities[2].tid == 0);
  REQUIRE(trace.errors.size() == 1);
  CHECK(trace.errors[0] == "cuptiSubscribe: CUPTI_ERROR_UNKNOWN");
  REQUIRE(trace.summaries.size() == 1);
  CHECK(trace.summaries[0].pid == 5);
  CHECK(trace.summaries[0].kernels == 1);
  CHECK(trace.summaries[0].clock == "monotonic");
  CHECK(trace.after_last_summary == 0);
  CHECK_FALSE(trace.truncated);
}

TEST_CASE("kernel trace: malformed lines are rejected with a reason, the rest is kept") {
  const std::string good = kernel("_Z1kv", 7, 10, 20);
  struct Case {
    std::string line;
    std::string reason;  // a part of the expected reason
  };
  const Case cases[] = {
      {"not json at all", "not JSON"},
      {"[1,2,3]", "not a JSON object"},
      {R"({"kind":"kernal"})", "unknown kind 'kernal'"},
      {R"({"name":"x"})", "'kind' is missing"},
      {R"({"kind":"kernel","name":"_Z1kv","device":0,"context":1,"stream":7,"correlation":1,"start_ns":10,"grid":[1,1,1],"block":[1,1,1]})",
       "'end_ns' is missing"},
      {R"({"kind":"kernel","name":"_Z1kv","device":-1,"context":1,"stream":7,"correlation":1,"start_ns":10,"end_ns":20,"grid":[1,1,1],"block":[1,1,1]})",
       "'device' is missing or not a non-negative integer"},
      {R"({"kind":"kernel","name":"_Z1kv","device":0,"context":1,"stream":7,"correlation":1,"start_ns":10.5,"end_ns":20,"grid":[1,1,1],"block":[1,1,1]})",
       "'start_ns'"},
      {R"({"kind":"kernel","name":"_Z1kv","device":0,"context":1,"stream":4294967296,"correlation":1,"start_ns":10,"end_ns":20,"grid":[1,1,1],"block":[1,1,1]})",
       "'stream' is out of range"},
      {R"({"kind":"kernel","name":"_Z1kv","device":0,"context":1,"stream":7,"correlation":1,"start_ns":30,"end_ns":20,"grid":[1,1,1],"block":[1,1,1]})",
       "ends before it starts"},
      {R"({"kind":"kernel","name":"_Z1kv","device":0,"context":1,"stream":7,"correlation":1,"start_ns":0,"end_ns":0,"grid":[1,1,1],"block":[1,1,1]})",
       "no start time"},
      {R"({"kind":"kernel","name":"_Z1kv","device":0,"context":1,"stream":7,"correlation":1,"start_ns":10,"end_ns":20,"grid":[1,1],"block":[1,1,1]})",
       "'grid' is not an array of 3"},
      {R"({"kind":"kernel","name":"","device":0,"context":1,"stream":7,"correlation":1,"start_ns":10,"end_ns":20,"grid":[1,1,1],"block":[1,1,1]})",
       "'name' is empty"},
      {R"({"kind":"kernel","name":"_Z1kv","device":0,"context":1,"stream":7,"correlation":1,"start_ns":10,"end_ns":20,"grid":[1,1,1],"block":[1,1,1],"launcher":""})",
       "'launcher' is empty"},
      {R"({"kind":"kernel","name":"_Z1kv","device":0,"context":1,"stream":7,"correlation":1,"start_ns":10,"end_ns":20,"grid":[1,1,1],"block":[1,1,1],"launcher":5})",
       "'launcher' is missing or not a string"},
      {R"({"kind":"memcpy","copy":"H\"D","bytes":1,"device":0,"context":1,"stream":7,"correlation":1,"start_ns":10,"end_ns":20})",
       "'copy' is not a copy kind"},
      {R"({"kind":"summary","pid":1,"flush":1})", "'records' is missing"},
      {R"({"kind":"mark","pid":1,"correlation":-3,"stream":7,"at_ns":5})", "'correlation' is missing or not a non-negative integer"},
      {R"({"kind":"mark","pid":1,"correlation":3,"stream":7})", "'at_ns' is missing"},
      {"{\"kind\":\"kernel\",\"name\":\"\xff\xfe\"}", "not JSON"},  // invalid UTF-8
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    const KernelTrace trace = parse_kernel_trace(good + c.line + "\n" + good);
    CHECK(trace.activities.size() == 2);
    CHECK(trace.rejected == 1);
    REQUIRE(trace.problems.size() == 1);
    CHECK(trace.problems[0].line == 2);
    CHECK_MESSAGE(trace.problems[0].reason.find(c.reason) != std::string::npos, trace.problems[0].reason);
  }
}

TEST_CASE("kernel trace: caps on lines, names, launchers, activities and bytes") {
  TraceLimits limits;
  SUBCASE("a line over the cap") {
    limits.max_line_bytes = 300;
    const std::string long_name(400, 'a');
    const KernelTrace trace = parse_kernel_trace(kernel("_Z1kv", 7, 1, 2) + kernel(long_name, 7, 1, 2), limits);
    CHECK(trace.activities.size() == 1);
    REQUIRE(trace.problems.size() == 1);
    CHECK(trace.problems[0].reason.find("over the cap of 300") != std::string::npos);
  }
  SUBCASE("a name over the cap") {
    limits.max_name_bytes = 64;
    const KernelTrace trace = parse_kernel_trace(kernel(std::string(65, 'k'), 7, 1, 2), limits);
    CHECK(trace.activities.empty());
    REQUIRE(trace.problems.size() == 1);
    CHECK(trace.problems[0].reason.find("'name' of 65 bytes is over the cap of 64") != std::string::npos);
  }
  SUBCASE("distinct names, launchers and activities") {
    limits.max_names = 2;
    limits.max_launchers = 1;
    limits.max_activities = 4;
    limits.kept_problems = 2;
    const std::string text = kernel("a", 1, 1, 2, "/l1") + kernel("b", 1, 1, 2, "/l1") + kernel("c", 1, 1, 2, "/l1") +
                             kernel("a", 1, 1, 2, "/l2") + kernel("a", 1, 1, 2) + kernel("b", 1, 1, 2) +
                             kernel("b", 1, 1, 2);
    const KernelTrace trace = parse_kernel_trace(text, limits);
    CHECK(trace.activities.size() == 4);
    CHECK(trace.names.size() == 2);
    CHECK(trace.launchers.size() == 1);
    CHECK(trace.rejected == 3);
    REQUIRE(trace.problems.size() == 2);  // kept_problems, though 3 were rejected
    CHECK(trace.problems[0].reason == "more than 2 distinct kernel names");
    CHECK(trace.problems[1].reason == "more than 1 distinct launchers");
  }
  SUBCASE("input over the byte cap: whole lines up to the cap, flagged") {
    const std::string one = kernel("_Z1kv", 7, 1, 2);
    limits.max_bytes = one.size() * 2 + one.size() / 2;
    const KernelTrace trace = parse_kernel_trace(one + one + one + one, limits);
    CHECK(trace.truncated);
    CHECK(trace.activities.size() == 2);
    CHECK(trace.rejected == 0);
  }
}

TEST_CASE("kernel trace: files are read as hostile input") {
  TempDir dir;
  const std::string one = kernel("_Z1kv", 7, 1, 2);
  write_file(dir.file("trace.jsonl"), one + one + one);
  auto trace = read_kernel_trace(dir.file("trace.jsonl"));
  REQUIRE(trace);
  CHECK(trace.value().activities.size() == 3);

  TraceLimits limits;
  limits.max_bytes = one.size() + 5;
  trace = read_kernel_trace(dir.file("trace.jsonl"), limits);
  REQUIRE(trace);
  CHECK(trace.value().truncated);
  CHECK(trace.value().activities.size() == 1);

  REQUIRE(::symlink(dir.file("trace.jsonl").c_str(), dir.file("link.jsonl").c_str()) == 0);
  CHECK_FALSE(read_kernel_trace(dir.file("link.jsonl")));
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
  const auto fifo = read_kernel_trace(dir.file("fifo"));  // must not block
  REQUIRE_FALSE(fifo);
  CHECK(fifo.status().message().find("not a regular file") != std::string::npos);
  CHECK_FALSE(read_kernel_trace(dir.file("absent.jsonl")));
}

TEST_CASE("kernel trace: busy time is the union across overlapping streams") {
  // Stream 1 runs [100,200) and [300,400); stream 2 overlaps the first with [150,250).
  const KernelTrace trace =
      parse_kernel_trace(kernel("a", 1, 100, 200) + kernel("b", 2, 150, 250) + kernel("a", 1, 300, 400));
  const TraceSummary s = summarize(trace, {0, 1000, std::nullopt});
  CHECK(s.window_ns == 1000);
  CHECK(s.all.busy_ns == 250);  // [100,250) and [300,400)
  CHECK(s.all.sum_ns == 300);
  CHECK(s.all.count == 3);
  CHECK(s.kernels.busy_ns == 250);
  REQUIRE(s.streams.size() == 2);
  CHECK(s.streams[0].stream == 1);
  CHECK(s.streams[0].time.busy_ns == 200);
  CHECK(s.streams[1].stream == 2);
  CHECK(s.streams[1].time.busy_ns == 100);
  CHECK_FALSE(s.off_stream.has_value());
  // Touching intervals merge; nested ones count once.
  const KernelTrace nested =
      parse_kernel_trace(kernel("a", 1, 0 + 10, 100) + kernel("b", 2, 20, 30) + kernel("c", 3, 100, 110));
  CHECK(summarize(nested, {0, 1000, std::nullopt}).all.busy_ns == 100);
}

TEST_CASE("kernel trace: the window clips work and reports what lies outside it") {
  // Window [100,300) on stream 1. A kernel straddles each edge; one runs wholly after the window
  // (deferred work); one runs inside it on a side stream.
  const KernelTrace trace = parse_kernel_trace(kernel("edge0", 1, 50, 150) + kernel("inside", 1, 160, 200) +
                                               kernel("side", 9, 200, 240) + kernel("edge1", 1, 250, 400) +
                                               kernel("late", 9, 500, 900));
  const TraceSummary s = summarize(trace, {100, 300, 1});
  CHECK(s.all.sum_ns == 50 + 40 + 40 + 50);
  CHECK(s.all.count == 4);
  CHECK(s.before.sum_ns == 50);
  CHECK(s.before.count == 1);
  CHECK(s.after.sum_ns == 100 + 400);
  CHECK(s.after.busy_ns == 500);
  CHECK(s.after.count == 2);
  REQUIRE(s.off_stream.has_value());
  CHECK(s.off_stream->sum_ns == 40);
  CHECK(s.off_stream->count == 1);
  // The top table counts only the parts inside the window.
  REQUIRE(!s.top.empty());
  CHECK(s.top[0].total_ns == 50);
  CHECK_FALSE(summarize_trace(trace, {300, 100, std::nullopt}, {}));
}

TEST_CASE("kernel trace: launcher classes") {
  ClassifySettings settings;
  settings.candidate_paths = {"/work/ws", "/tmp/ext-build/"};
  CHECK(classify_launcher("/work/ws/build/bias_relu.so", settings) == LauncherClass::candidate);
  CHECK(classify_launcher("/tmp/ext-build/libcublasLt.so.13", settings) == LauncherClass::candidate);
  CHECK(classify_launcher("/work/ws2/x.so", settings) == LauncherClass::other);  // not under /work/ws
  CHECK(classify_launcher("/usr/lib/python3/site-packages/nvidia/cu13/lib/libcublasLt.so.13", settings) ==
        LauncherClass::cuda_library);
  CHECK(classify_launcher("/opt/nvidia/cublas/lib/libcublas.so.13.0.2", settings) == LauncherClass::cuda_library);
  CHECK(classify_launcher("/x/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9", settings) ==
        LauncherClass::cuda_library);
  CHECK(classify_launcher("/x/torch/lib/libtorch_cuda.so", settings) == LauncherClass::torch);
  CHECK(classify_launcher("/x/torch/lib/libc10_cuda.so", settings) == LauncherClass::torch);
  CHECK(classify_launcher("/root/.triton/cache/ab12/cuda_utils.so", settings) == LauncherClass::triton);
  CHECK(classify_launcher("/usr/lib/x86_64-linux-gnu/libffi.so.8", settings) == LauncherClass::other);
  CHECK(classify_launcher("", settings) == LauncherClass::unknown);

  settings.trusted_library_paths = {"/x/torch", "/x/nvidia"};
  CHECK(classify_launcher("/x/torch/lib/libtorch_cuda.so", settings) == LauncherClass::torch);
  CHECK(classify_launcher("/x/nvidia/cudnn/lib/libcudnn.so.9", settings) == LauncherClass::cuda_library);
  CHECK(classify_launcher("/tmp/libcublasLt.so.13", settings) == LauncherClass::other);  // a look-alike
  CHECK(classify_launcher("/work/ws/build/x.so", settings) == LauncherClass::candidate);

  CHECK(classify_kernel_name("nvjet_hsh_128x256_64x4_2x1_v_bz_coopB_NNT", "") == LauncherClass::cuda_library);
  CHECK(classify_kernel_name("_Z27sm90_xmma_gemm_f32f32_tf32", "") == LauncherClass::cuda_library);
  CHECK(classify_kernel_name("_ZN7cutlass6KernelIvEEvT_", "void cutlass::Kernel<void>(void)") ==
        LauncherClass::cuda_library);
  CHECK(classify_kernel_name("_ZN2at6native29vectorized_elementwise_kernelIv",
                             "void at::native::vectorized_elementwise_kernel<4>()") == LauncherClass::torch);
  CHECK(classify_kernel_name("_ZN2at6native4fillEv", "") == LauncherClass::torch);  // no demangled form
  CHECK(classify_kernel_name("triton_poi_fused_add_0", "") == LauncherClass::triton);
  // torch's attention kernels, whatever library names they carry.
  CHECK(classify_kernel_name("_ZN13pytorch_flash15flash_fwd_kernelIvEEvv",
                             "void pytorch_flash::flash_fwd_kernel<void>()") == LauncherClass::torch);
  CHECK(classify_kernel_name("fmha_cutlassF_f32_aligned_64x64_rf_sm80", "") == LauncherClass::torch);
  CHECK(classify_kernel_name("_Z9my_kernelPf", "my_kernel(float*)") == LauncherClass::unknown);
  // An extension's kernel that takes packed accessors carries c10's types in its parameters: its
  // own, not torch's (an honest control was flagged for falling back on torch before).
  CHECK(classify_kernel_name(
            "_ZN12_GLOBAL__N_122bias_relu_scale_kernelIfEEvN5torch9headeronly6detail"
            "27GenericPackedTensorAccessorINS3_14TensorAccessorIN3c108ArrayRefIlEEfLm1EEEfLm2EiEEf",
            "void (anonymous namespace)::bias_relu_scale_kernel<float>(torch::headeronly::detail::"
            "GenericPackedTensorAccessor<torch::headeronly::detail::TensorAccessor<c10::ArrayRef<long>, "
            "float, 1ul, torch::headeronly::RestrictPtrTraits, int>, at::detail::IndexBoundsCheck<2ul, int>, "
            "float, 2ul, torch::headeronly::RestrictPtrTraits, int>, float const*, float)") ==
        LauncherClass::unknown);
  CHECK(classify_kernel_name("_ZN12_GLOBAL__N_16kernelEN3c108ArrayRefIlEE", "") == LauncherClass::unknown);
  // c10's own kernels, and torch's kernels whose ATen marks are only in their arguments.
  CHECK(classify_kernel_name("_ZN3c104cuda11fill_kernelEv", "void c10::cuda::fill_kernel()") == LauncherClass::torch);
  CHECK(classify_kernel_name("_ZN3c104cuda11fill_kernelEv", "") == LauncherClass::torch);
  CHECK(classify_kernel_name("_Z10gatherTopKIfjLi2ELb0EEvN2at4cuda6detail10TensorInfoIKfjEE",
                             "void gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float "
                             "const, unsigned int>)") == LauncherClass::torch);
  CHECK(classify_kernel_name("_Z19cunn_SoftMaxForwardILi4EfffN2at6native12_GLOBAL__N_122SoftMaxForwardEpilogueEEvv",
                             "void cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::"
                             "SoftMaxForwardEpilogue>()") == LauncherClass::torch);
}

TEST_CASE("kernel trace: shares by class and launcher, and the top kernels") {
  // Candidate 600 ns (3 calls), cuBLAS 300 ns, torch by name 50 ns, unknown 50 ns.
  const std::string ext = "/work/ws/build/ext.so";
  const std::string blas = "/x/nvidia/cu13/lib/libcublasLt.so.13";
  const KernelTrace trace = parse_kernel_trace(
      kernel("_Z4minev", 7, 1000, 1200, ext, 11) + kernel("_Z4minev", 7, 1200, 1400, ext, 11) +
      kernel("_Z4minev", 7, 1400, 1600, ext, 11) + kernel("nvjet_gemm", 7, 1600, 1900, blas, 11) +
      kernel("_ZN2at6native4fillEv", 7, 1900, 1950) + kernel("_Z7mysteryv", 7, 1950, 2000, "", 12));
  SummarySettings settings;
  settings.classify.candidate_paths = {"/work/ws"};
  settings.top_n = 3;
  const TraceSummary s = summarize(trace, {1000, 2000, std::nullopt}, settings);
  CHECK(s.all.sum_ns == 1000);
  CHECK(share(s, LauncherClass::candidate).share == doctest::Approx(0.6));
  CHECK(share(s, LauncherClass::candidate).time.count == 3);
  CHECK(share(s, LauncherClass::cuda_library).share == doctest::Approx(0.3));
  CHECK(share(s, LauncherClass::torch).share == doctest::Approx(0.05));
  CHECK(share(s, LauncherClass::torch).by_name == 1);
  CHECK(share(s, LauncherClass::unknown).share == doctest::Approx(0.05));
  CHECK(share(s, LauncherClass::other).time.count == 0);
  CHECK(s.unknown_launchers == 2);
  CHECK(s.threads == 2);
  REQUIRE(s.launchers.size() == 3);
  CHECK(s.launchers[0].path == ext);
  CHECK(s.launchers[0].share == doctest::Approx(0.6));
  CHECK(s.launchers[1].path == blas);
  CHECK(s.launchers[2].path.empty());
  REQUIRE(s.top.size() == 3);
  CHECK(s.top[0].name == "_Z4minev");
  CHECK(s.top[0].calls == 3);
  CHECK(s.top[0].mean_ns == doctest::Approx(200));
  CHECK(s.top[0].launcher_class == LauncherClass::candidate);
  CHECK(s.top[1].name == "nvjet_gemm");
  CHECK(s.top[2].launcher_class == LauncherClass::torch);
  CHECK(s.top[2].class_by_name);

  std::string json;
  JsonWriter writer(json);
  write_trace_summary(writer, s);
  CHECK(cudaagent::testing::is_valid_json(json));
  CHECK(json.find(R"("candidate":{"sum_ns":600,"busy_ns":600,"count":3,"share":0.6,"by_name":0})") !=
        std::string::npos);
}

TEST_CASE("kernel trace: losses and unflushed records are reported") {
  SUBCASE("a complete trace") {
    const KernelTrace trace = parse_kernel_trace(kernel("a", 1, 1, 2) + kernel("a", 1, 2, 3) + summary_line(9, 1, 2));
    const TraceLosses losses = trace_losses(trace);
    CHECK(losses.missing == 0);
    CHECK(losses.dropped == 0);
    CHECK(trace.after_last_summary == 0);
  }
  SUBCASE("records announced but absent, dropped ones, a tail after the summary") {
    const KernelTrace trace =
        parse_kernel_trace(kernel("a", 1, 1, 2) + summary_line(9, 1, 3, 4) + kernel("a", 1, 2, 3));
    const TraceLosses losses = trace_losses(trace);
    CHECK(losses.missing == 2);
    CHECK(losses.dropped == 4);
    CHECK(trace.after_last_summary == 1);
  }
  SUBCASE("the latest flush of each process counts") {
    const KernelTrace trace = parse_kernel_trace(kernel("a", 1, 1, 2) + summary_line(9, 1, 1, 1) +
                                                 kernel("a", 1, 2, 3) + summary_line(9, 2, 2, 1) +
                                                 summary_line(10, 1, 0, 2));
    REQUIRE(trace.summaries.size() == 2);
    CHECK(trace.summaries[0].flush == 2);
    CHECK(trace.summaries[0].kernels == 2);
    const TraceLosses losses = trace_losses(trace);
    CHECK(losses.dropped == 3);
    CHECK(losses.missing == 0);
    CHECK(losses.launches == 6);  // 3 per process (summary_line)
    CHECK(losses.records == 2);
    std::string json;
    JsonWriter writer(json);
    write_trace_health(writer, trace);
    CHECK(cudaagent::testing::is_valid_json(json));
    CHECK(json.find(R"("processes":2)") != std::string::npos);
    CHECK(json.find(R"("dropped":3)") != std::string::npos);
  }
}
