// PM-sampling probe: can a TRUSTED process see another process's GPU work
// through CUPTI's PM sampling (whole-GPU hardware counters sampled at a
// fixed GPU-time interval)?  Two roles in one binary, see README.md:
//   probe devices                       exit 0 if a CUDA device is usable, 77 if not
//   probe sample --interval-ns N --metrics a,b --out FILE [opts] -- COMMAND...
//   probe workload --kernel-us D --count N --gap-us G --out FILE [--blocks B]
// Every CUDA/CUPTI return code is checked; failures print the error name.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <cupti_activity.h>
#include <cupti_result.h>

#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kExitNoDevice = 77;
constexpr int kExitBadMetric = 2;

uint64_t mono_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

[[noreturn]] void die(const char* what, const char* name, const char* file, int line) {
    std::fprintf(stderr, "probe: %s failed: %s (%s:%d)\n", what, name, file, line);
    std::exit(1);
}

void check_cu(CUresult r, const char* what, const char* file, int line) {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    die(what, name ? name : "unknown CUresult", file, line);
}
void check_rt(cudaError_t r, const char* what, const char* file, int line) {
    if (r == cudaSuccess) return;
    die(what, cudaGetErrorName(r), file, line);
}
const char* cupti_name(CUptiResult r) {
    const char* name = nullptr;
    if (cuptiGetResultString(r, &name) != CUPTI_SUCCESS || !name) return "unknown CUptiResult";
    return name;
}
void check_cupti(CUptiResult r, const char* what, const char* file, int line) {
    if (r == CUPTI_SUCCESS) return;
    die(what, cupti_name(r), file, line);
}
#define CU(x) check_cu((x), #x, __FILE__, __LINE__)
#define RT(x) check_rt((x), #x, __FILE__, __LINE__)
#define CUPTI(x) check_cupti((x), #x, __FILE__, __LINE__)

// Initialise the driver; exit 77 with a plain message when there is no GPU,
// so run.sh (and the lead) can tell "no device here" from a real failure.
void init_driver_or_exit() {
    CUresult r = cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH ||
        r == CUDA_ERROR_STUB_LIBRARY) {
        const char* name = nullptr;
        cuGetErrorName(r, &name);
        std::fprintf(stderr, "probe: no CUDA device (cuInit: %s)\n", name ? name : "?");
        std::exit(kExitNoDevice);
    }
    CU(r);
    int count = 0;
    CU(cuDeviceGetCount(&count));
    if (count == 0) {
        std::fprintf(stderr, "probe: no CUDA device (device count 0)\n");
        std::exit(kExitNoDevice);
    }
}

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t next = s.find(',', pos);
        if (next == std::string::npos) next = s.size();
        if (next > pos) out.push_back(s.substr(pos, next - pos));
        pos = next + 1;
    }
    return out;
}

std::string json_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
    }
    return o;
}

// ---------------------------------------------------------------- sample ---

struct SampleArgs {
    uint64_t interval_ns = 1000;
    std::vector<std::string> metrics{"gr__cycles_active.avg", "gr__cycles_elapsed.max",
                                     "sm__cycles_active.avg"};
    std::string out;
    size_t hw_buffer_mb = 1024;     // raw records before decode; big so a slow decode never overflows
    uint32_t max_samples = 2000000; // decoded samples held before the image must be evaluated and recycled
    unsigned decode_ms = 10;       // how often the trusted side drains the hardware buffer
    bool sysclk = false;           // trigger on SYSCLK cycles instead of GPU time (fallback test)
    bool own_context = true;       // retain a primary context in the sampler (see README)
    bool list_metrics = false;
    bool handshake = false;        // COMMAND is `probe workload`: start sampling once it is ready
    unsigned eval_budget_s = 60;   // stop evaluating (and say so) after this long
    std::vector<char*> command;
};

// The base metric names the profiler host offers for PM sampling on this
// chip; printed when a requested metric is refused, since that list is what
// the next run needs.
void print_base_metrics(CUpti_Profiler_Host_Object* host) {
    const CUpti_MetricType types[] = {CUPTI_METRIC_TYPE_COUNTER, CUPTI_METRIC_TYPE_RATIO,
                                      CUPTI_METRIC_TYPE_THROUGHPUT};
    const char* type_names[] = {"counter", "ratio", "throughput"};
    for (int t = 0; t < 3; ++t) {
        CUpti_Profiler_Host_GetBaseMetrics_Params p{};
        p.structSize = CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE;
        p.pHostObject = host;
        p.metricType = types[t];
        CUptiResult r = cuptiProfilerHostGetBaseMetrics(&p);
        if (r != CUPTI_SUCCESS) {
            std::fprintf(stderr, "probe: GetBaseMetrics(%s): %s\n", type_names[t], cupti_name(r));
            continue;
        }
        std::fprintf(stderr, "PM sampling base metrics (%s, %zu):\n", type_names[t], p.numMetrics);
        for (size_t i = 0; i < p.numMetrics; ++i)
            std::fprintf(stderr, "  %s\n", p.ppMetricNames[i]);
    }
    std::fprintf(stderr, "(append a rollup: .sum .avg .min .max, e.g. gr__cycles_active.avg)\n");
}

bool base_metric_known(CUpti_Profiler_Host_Object* host, const std::string& metric) {
    const std::string base = metric.substr(0, metric.find('.'));
    const CUpti_MetricType types[] = {CUPTI_METRIC_TYPE_COUNTER, CUPTI_METRIC_TYPE_RATIO,
                                      CUPTI_METRIC_TYPE_THROUGHPUT};
    for (CUpti_MetricType type : types) {
        CUpti_Profiler_Host_GetBaseMetrics_Params p{};
        p.structSize = CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE;
        p.pHostObject = host;
        p.metricType = type;
        if (cuptiProfilerHostGetBaseMetrics(&p) != CUPTI_SUCCESS) continue;
        for (size_t i = 0; i < p.numMetrics; ++i)
            if (base == p.ppMetricNames[i]) return true;
    }
    return false;
}

// Take the tightest of a few (mono, cupti, mono) brackets so the pair's
// error is the bracket width, reported alongside.
void timestamp_pair(uint64_t& cupti_ts, uint64_t& mono, uint64_t& width) {
    width = UINT64_MAX;
    for (int i = 0; i < 16; ++i) {
        uint64_t a = mono_ns();
        uint64_t c = 0;
        CUPTI(cuptiGetTimestamp(&c));
        uint64_t b = mono_ns();
        if (b - a < width) {
            width = b - a;
            cupti_ts = c;
            mono = a + (b - a) / 2;
        }
    }
}

struct Decoder {
    CUpti_PmSampling_Object* sampler = nullptr;
    CUpti_Profiler_Host_Object* host = nullptr;
    std::vector<const char*> metric_ptrs;
    std::vector<uint8_t> image;
    size_t emitted = 0; // samples of the current image already written
    bool overflow = false;
    size_t decode_calls = 0;
    size_t image_recycles = 0;
    uint64_t eval_deadline = 0; // mono ns; 0 = none
    bool truncated = false;     // evaluation stopped at the deadline
    size_t dropped = 0;         // samples decoded but not evaluated
    std::vector<std::string> lines;

    void init_image() {
        CUpti_PmSampling_CounterDataImage_Initialize_Params p{};
        p.structSize = CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE;
        p.pPmSamplingObject = sampler;
        p.counterDataSize = image.size();
        p.pCounterData = image.data();
        CUPTI(cuptiPmSamplingCounterDataImageInitialize(&p));
        emitted = 0;
    }

    void emit_completed(size_t& total_out) {
        CUpti_PmSampling_GetCounterDataInfo_Params info{};
        info.structSize = CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE;
        info.pCounterDataImage = image.data();
        info.counterDataImageSize = image.size();
        CUPTI(cuptiPmSamplingGetCounterDataInfo(&info));
        total_out = info.numTotalSamples;
        std::vector<double> values(metric_ptrs.size());
        char buf[128];
        for (size_t i = emitted; i < info.numCompletedSamples; ++i) {
            // Evaluation is the slow part; past the budget keep what we have
            // (in time order) rather than be killed with nothing written.
            if (eval_deadline && (i % 1024) == 0 && mono_ns() > eval_deadline) {
                truncated = true;
                dropped += info.numCompletedSamples - i;
                break;
            }
            CUpti_PmSampling_CounterData_GetSampleInfo_Params s{};
            s.structSize = CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE;
            s.pPmSamplingObject = sampler;
            s.pCounterDataImage = image.data();
            s.counterDataImageSize = image.size();
            s.sampleIndex = i;
            CUPTI(cuptiPmSamplingCounterDataGetSampleInfo(&s));
            CUpti_Profiler_Host_EvaluateToGpuValues_Params e{};
            e.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
            e.pHostObject = host;
            e.pCounterDataImage = image.data();
            e.counterDataImageSize = image.size();
            e.rangeIndex = i;
            e.ppMetricNames = metric_ptrs.data();
            e.numMetrics = metric_ptrs.size();
            e.pMetricValues = values.data();
            CUPTI(cuptiProfilerHostEvaluateToGpuValues(&e));
            std::string line = "{\"s\":" + std::to_string(s.startTimestamp) +
                               ",\"e\":" + std::to_string(s.endTimestamp) + ",\"v\":[";
            for (size_t m = 0; m < values.size(); ++m) {
                // JSON has no NaN/inf: write null (analyse.py counts them)
                if (std::isfinite(values[m]))
                    std::snprintf(buf, sizeof buf, "%s%.17g", m ? "," : "", values[m]);
                else
                    std::snprintf(buf, sizeof buf, "%snull", m ? "," : "");
                line += buf;
            }
            line += "]}";
            lines.push_back(std::move(line));
        }
        emitted = info.numCompletedSamples;
    }

    // Drain the hardware buffer into the image; when the image fills, evaluate
    // it and recycle it so a long run never loses samples. While the workload
    // runs, evaluation (the slow part) is deferred unless the image is full, so
    // the decode keeps pace with the hardware buffer. Returns when all records
    // have been decoded.
    void drain(bool evaluate) {
        for (;;) {
            CUpti_PmSampling_DecodeData_Params d{};
            d.structSize = CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE;
            d.pPmSamplingObject = sampler;
            d.pCounterDataImage = image.data();
            d.counterDataImageSize = image.size();
            CUptiResult r = cuptiPmSamplingDecodeData(&d);
            ++decode_calls;
            if (r == CUPTI_ERROR_OUT_OF_MEMORY) { // documented: hardware-buffer overflow
                overflow = true;
                std::fprintf(stderr, "probe: decode reported hardware-buffer overflow\n");
                return;
            }
            check_cupti(r, "cuptiPmSamplingDecodeData", __FILE__, __LINE__);
            if (d.overflow) overflow = true;
            CUpti_PmSampling_GetCounterDataInfo_Params info{};
            info.structSize = CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE;
            info.pCounterDataImage = image.data();
            info.counterDataImageSize = image.size();
            CUPTI(cuptiPmSamplingGetCounterDataInfo(&info));
            // "Full" by stop reason, or by count (the header leaves open whether
            // numTotalSamples is capacity or count; either way this is safe).
            const bool full = d.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL ||
                              (info.numCompletedSamples > 0 &&
                               info.numCompletedSamples >= info.numTotalSamples);
            if (full || evaluate) {
                size_t total = 0;
                emit_completed(total);
            }
            if (!full) return;
            init_image();
            ++image_recycles;
            // only decode again if the hardware buffer still holds records
            if (d.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) return;
        }
    }
};

int run_sample(const SampleArgs& a) {
    init_driver_or_exit();
    CUdevice dev = 0;
    CU(cuDeviceGet(&dev, 0));
    char dev_name[256] = {};
    CU(cuDeviceGetName(dev_name, sizeof dev_name, dev));
    CUcontext ctx = nullptr;
    if (a.own_context) {
        CU(cuDevicePrimaryCtxRetain(&ctx, dev));
        CU(cuCtxSetCurrent(ctx));
    }

    CUpti_Profiler_Initialize_Params pinit{};
    pinit.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
    CUPTI(cuptiProfilerInitialize(&pinit));

    CUpti_Device_GetChipName_Params chip{};
    chip.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
    chip.deviceIndex = 0;
    CUPTI(cuptiDeviceGetChipName(&chip));
    const std::string chip_name = chip.pChipName;

    CUpti_PmSampling_GetCounterAvailability_Params avail{};
    avail.structSize = CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE;
    avail.deviceIndex = 0;
    CUPTI(cuptiPmSamplingGetCounterAvailability(&avail));
    std::vector<uint8_t> avail_image(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = avail_image.data();
    CUPTI(cuptiPmSamplingGetCounterAvailability(&avail));

    CUpti_Profiler_Host_Initialize_Params hinit{};
    hinit.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
    hinit.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    hinit.pChipName = chip_name.c_str();
    hinit.pCounterAvailabilityImage = avail_image.data();
    CUPTI(cuptiProfilerHostInitialize(&hinit));
    CUpti_Profiler_Host_Object* host = hinit.pHostObject;

    if (a.list_metrics) {
        std::fprintf(stderr, "chip %s (%s)\n", chip_name.c_str(), dev_name);
        print_base_metrics(host);
        return 0;
    }
    for (const auto& m : a.metrics) {
        if (!base_metric_known(host, m)) {
            std::fprintf(stderr, "probe: metric '%s' is not a PM-sampling base metric on %s\n",
                         m.c_str(), chip_name.c_str());
            print_base_metrics(host);
            return kExitBadMetric;
        }
    }
    std::vector<const char*> metric_ptrs;
    for (const auto& m : a.metrics) metric_ptrs.push_back(m.c_str());

    CUpti_Profiler_Host_ConfigAddMetrics_Params add{};
    add.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
    add.pHostObject = host;
    add.ppMetricNames = metric_ptrs.data();
    add.numMetrics = metric_ptrs.size();
    if (CUptiResult r = cuptiProfilerHostConfigAddMetrics(&add); r != CUPTI_SUCCESS) {
        std::fprintf(stderr, "probe: ConfigAddMetrics refused the metrics: %s\n", cupti_name(r));
        print_base_metrics(host);
        return kExitBadMetric;
    }
    CUpti_Profiler_Host_GetConfigImageSize_Params csize{};
    csize.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
    csize.pHostObject = host;
    CUPTI(cuptiProfilerHostGetConfigImageSize(&csize));
    std::vector<uint8_t> config(csize.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params cimg{};
    cimg.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
    cimg.pHostObject = host;
    cimg.configImageSize = config.size();
    cimg.pConfigImage = config.data();
    CUPTI(cuptiProfilerHostGetConfigImage(&cimg));
    CUpti_Profiler_Host_GetNumOfPasses_Params passes{};
    passes.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
    passes.configImageSize = config.size();
    passes.pConfigImage = config.data();
    CUPTI(cuptiProfilerHostGetNumOfPasses(&passes));
    if (passes.numOfPasses != 1) {
        std::fprintf(stderr, "probe: metrics need %zu passes; PM sampling takes one. Use fewer.\n",
                     passes.numOfPasses);
        return kExitBadMetric;
    }

    CUpti_PmSampling_Enable_Params en{};
    en.structSize = CUpti_PmSampling_Enable_Params_STRUCT_SIZE;
    en.deviceIndex = 0;
    CUPTI(cuptiPmSamplingEnable(&en));

    CUpti_PmSampling_SetConfig_Params sc{};
    sc.structSize = CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE;
    sc.pPmSamplingObject = en.pPmSamplingObject;
    sc.configSize = config.size();
    sc.pConfig = config.data();
    sc.hardwareBufferSize = a.hw_buffer_mb << 20;
    sc.samplingInterval = a.interval_ns;
    sc.triggerMode = a.sysclk ? CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL
                              : CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
    if (CUptiResult r = cuptiPmSamplingSetConfig(&sc); r != CUPTI_SUCCESS) {
        // Reported distinctly: run.sh probes how small an interval is accepted.
        std::fprintf(stderr, "probe: SetConfig refused interval %llu (%s): %s\n",
                     (unsigned long long)a.interval_ns, a.sysclk ? "sysclk" : "ns", cupti_name(r));
        return 4;
    }

    Decoder dec;
    dec.sampler = en.pPmSamplingObject;
    dec.host = host;
    dec.metric_ptrs = metric_ptrs;
    CUpti_PmSampling_GetCounterDataSize_Params cds{};
    cds.structSize = CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE;
    cds.pPmSamplingObject = en.pPmSamplingObject;
    cds.pMetricNames = metric_ptrs.data();
    cds.numMetrics = metric_ptrs.size();
    cds.maxSamples = a.max_samples;
    CUPTI(cuptiPmSamplingGetCounterDataSize(&cds));
    constexpr size_t kImageCap = size_t(2) << 30; // host memory for decoded samples
    if (cds.counterDataSize > kImageCap) {
        cds.maxSamples = uint32_t(double(cds.maxSamples) * kImageCap / cds.counterDataSize);
        CUPTI(cuptiPmSamplingGetCounterDataSize(&cds));
    }
    std::fprintf(stderr, "probe: chip %s, interval %llu ns, counter image %zu bytes for %u samples\n",
                 chip_name.c_str(), (unsigned long long)a.interval_ns, cds.counterDataSize, cds.maxSamples);
    dec.image.resize(cds.counterDataSize);
    dec.init_image();

    // Without --handshake sampling starts before COMMAND is forked. With it,
    // `probe workload` first initialises CUDA (context creation is not what we
    // measure, and it would add ~1 s of samples to evaluate), says "ready" on
    // a pipe, and waits for "go", sent right after sampling has started.
    uint64_t ts0 = 0, mono0 = 0, w0 = 0, started_mono = 0;
    auto start_sampling = [&] {
        timestamp_pair(ts0, mono0, w0);
        CUpti_PmSampling_Start_Params st{};
        st.structSize = CUpti_PmSampling_Start_Params_STRUCT_SIZE;
        st.pPmSamplingObject = en.pPmSamplingObject;
        CUPTI(cuptiPmSamplingStart(&st));
        started_mono = mono_ns();
    };
    int ready[2] = {-1, -1}, go[2] = {-1, -1};
    if (a.handshake && (pipe(ready) != 0 || pipe(go) != 0)) {
        std::perror("probe: pipe");
        return 1;
    }
    if (!a.handshake) start_sampling();

    pid_t child = fork();
    if (child < 0) {
        std::perror("probe: fork");
        return 1;
    }
    if (child == 0) {
        if (a.handshake) {
            close(ready[0]);
            close(go[1]);
            setenv("PM_PROBE_READY_FD", std::to_string(ready[1]).c_str(), 1);
            setenv("PM_PROBE_GO_FD", std::to_string(go[0]).c_str(), 1);
        }
        std::vector<char*> argv = a.command;
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        std::fprintf(stderr, "probe: exec %s: %s\n", argv[0], std::strerror(errno));
        _exit(127);
    }
    if (a.handshake) {
        close(ready[1]);
        close(go[0]);
        pollfd pfd{ready[0], POLLIN, 0};
        char byte = 0;
        const int pr = poll(&pfd, 1, 120000);
        if (pr != 1 || read(ready[0], &byte, 1) != 1) {
            std::fprintf(stderr, "probe: workload never said ready (%s)\n",
                         pr == 0 ? "timeout" : "it exited or failed");
            kill(child, SIGKILL);
            waitpid(child, nullptr, 0);
            return 1;
        }
        start_sampling();
        if (write(go[1], "g", 1) != 1) {
            std::perror("probe: write go");
            kill(child, SIGKILL);
            waitpid(child, nullptr, 0);
            return 1;
        }
        close(go[1]);
        close(ready[0]);
    }
    int status = 0;
    for (;;) {
        pid_t w = waitpid(child, &status, WNOHANG);
        if (w == child) break;
        if (w < 0 && errno != EINTR) {
            std::perror("probe: waitpid");
            return 1;
        }
        dec.drain(false);
        std::this_thread::sleep_for(std::chrono::milliseconds(a.decode_ms));
    }
    const uint64_t child_exit_mono = mono_ns();
    // Let a few more intervals complete so the last kernel's tail is sampled.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CUpti_PmSampling_Stop_Params sp{};
    sp.structSize = CUpti_PmSampling_Stop_Params_STRUCT_SIZE;
    sp.pPmSamplingObject = en.pPmSamplingObject;
    CUPTI(cuptiPmSamplingStop(&sp));
    uint64_t ts1 = 0, mono1 = 0, w1 = 0;
    timestamp_pair(ts1, mono1, w1);
    const uint64_t stopped_mono = mono_ns();
    dec.eval_deadline = stopped_mono + uint64_t(a.eval_budget_s) * 1000000000ull;
    dec.drain(true);
    const uint64_t evaluated_mono = mono_ns();

    CUpti_PmSampling_Disable_Params dis{};
    dis.structSize = CUpti_PmSampling_Disable_Params_STRUCT_SIZE;
    dis.pPmSamplingObject = en.pPmSamplingObject;
    CUPTI(cuptiPmSamplingDisable(&dis));
    CUpti_Profiler_Host_Deinitialize_Params hd{};
    hd.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
    hd.pHostObject = host;
    CUPTI(cuptiProfilerHostDeinitialize(&hd));
    CUpti_Profiler_DeInitialize_Params pd{};
    pd.structSize = CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE;
    CUPTI(cuptiProfilerDeInitialize(&pd));
    if (ctx) CU(cuDevicePrimaryCtxRelease(dev));

    const int child_rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    FILE* f = std::fopen(a.out.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "probe: cannot write %s: %s\n", a.out.c_str(), std::strerror(errno));
        return 1;
    }
    std::string metrics_json;
    for (size_t i = 0; i < a.metrics.size(); ++i)
        metrics_json += std::string(i ? "," : "") + "\"" + json_escape(a.metrics[i]) + "\"";
    std::fprintf(f,
                 "{\"header\":true,\"chip\":\"%s\",\"device\":\"%s\",\"interval_ns\":%llu,"
                 "\"trigger\":\"%s\",\"metrics\":[%s],\"overflow\":%s,\"samples\":%zu,"
                 "\"decode_calls\":%zu,\"image_recycles\":%zu,\"own_context\":%s,"
                 "\"pairs\":[{\"cupti\":%llu,\"mono\":%llu,\"width\":%llu},"
                 "{\"cupti\":%llu,\"mono\":%llu,\"width\":%llu}],"
                 "\"started_mono\":%llu,\"child_exit_mono\":%llu,\"child_rc\":%d,"
                 "\"image_bytes\":%zu,\"hw_buffer_mb\":%zu,\"final_evaluate_ms\":%.1f,"
                 "\"truncated\":%s,\"dropped\":%zu,\"handshake\":%s}\n",
                 json_escape(chip_name).c_str(), json_escape(dev_name).c_str(),
                 (unsigned long long)a.interval_ns, a.sysclk ? "sysclk" : "gpu_time",
                 metrics_json.c_str(), dec.overflow ? "true" : "false", dec.lines.size(),
                 dec.decode_calls, dec.image_recycles, a.own_context ? "true" : "false",
                 (unsigned long long)ts0, (unsigned long long)mono0, (unsigned long long)w0,
                 (unsigned long long)ts1, (unsigned long long)mono1, (unsigned long long)w1,
                 (unsigned long long)started_mono, (unsigned long long)child_exit_mono, child_rc,
                 dec.image.size(), a.hw_buffer_mb, (evaluated_mono - stopped_mono) / 1e6,
                 dec.truncated ? "true" : "false", dec.dropped, a.handshake ? "true" : "false");
    for (const auto& l : dec.lines) {
        std::fputs(l.c_str(), f);
        std::fputc('\n', f);
    }
    if (std::fclose(f) != 0) {
        std::fprintf(stderr, "probe: write %s failed\n", a.out.c_str());
        return 1;
    }
    std::fprintf(stderr, "probe: %zu samples (%zu dropped), overflow=%d, final evaluate %.1f ms, child rc=%d -> %s\n",
                 dec.lines.size(), dec.dropped, int(dec.overflow), (evaluated_mono - stopped_mono) / 1e6,
                 child_rc, a.out.c_str());
    return child_rc == 0 ? 0 : 3;
}

// -------------------------------------------------------------- workload ---

__device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// One block per SM, each spinning on %globaltimer for `ns`: the whole GPU is
// busy for ~D (as a real candidate kernel would be), so both the engine-level
// (gr__) and the per-SM averaged (sm__ .avg) counters should read ~100%
// active inside the kernel. Each block records its own start/end so the
// kernel's span in GPU time is known too.
__global__ void spin(unsigned long long ns, unsigned long long* stamps) {
    const unsigned long long start = globaltimer();
    while (globaltimer() - start < ns) {
    }
    if (threadIdx.x == 0) {
        stamps[2 * blockIdx.x] = start;
        stamps[2 * blockIdx.x + 1] = globaltimer();
    }
}

struct WorkloadArgs {
    unsigned kernel_us = 100;
    unsigned count = 200;
    unsigned gap_us = 1000;
    int blocks = 0; // 0: one per SM
    unsigned warmup = 5;
    std::string out;
};

void sleep_us(unsigned us) {
    std::this_thread::sleep_for(std::chrono::microseconds(us));
}

int run_workload(const WorkloadArgs& a) {
    int n = 0;
    cudaError_t r = cudaGetDeviceCount(&n);
    if (r == cudaErrorNoDevice || r == cudaErrorInsufficientDriver || n == 0) {
        std::fprintf(stderr, "probe workload: no CUDA device (%s)\n", cudaGetErrorName(r));
        return kExitNoDevice;
    }
    RT(r);
    RT(cudaSetDevice(0));
    RT(cudaFree(nullptr));
    int sms = 0;
    RT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int blocks = a.blocks > 0 ? a.blocks : sms;
    unsigned long long* d_stamps = nullptr;
    RT(cudaMalloc(&d_stamps, sizeof(unsigned long long) * 2 * blocks));
    std::vector<unsigned long long> stamps(2 * blocks);
    cudaStream_t stream;
    RT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    RT(cudaEventCreate(&e0));
    RT(cudaEventCreate(&e1));
    FILE* f = std::fopen(a.out.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "probe workload: cannot write %s\n", a.out.c_str());
        return 1;
    }
    // Handshake with `probe sample --handshake` (see there): ready, then go.
    const char* ready_fd = std::getenv("PM_PROBE_READY_FD");
    const char* go_fd = std::getenv("PM_PROBE_GO_FD");
    if (ready_fd && go_fd) {
        const int rfd = std::atoi(ready_fd), gfd = std::atoi(go_fd);
        char byte = 0;
        if (write(rfd, "r", 1) != 1 || read(gfd, &byte, 1) != 1) {
            std::fprintf(stderr, "probe workload: handshake with the sampler failed\n");
            return 1;
        }
        close(rfd);
        close(gfd);
    }
    std::fprintf(f, "{\"header\":true,\"kernel_us\":%u,\"count\":%u,\"gap_us\":%u,\"blocks\":%d,\"sms\":%d}\n",
                 a.kernel_us, a.count, a.gap_us, blocks, sms);
    // An idle stretch before and after, so "busy outside any kernel" has a
    // baseline that does not include context creation.
    sleep_us(20000);
    const unsigned total = a.warmup + a.count;
    for (unsigned i = 0; i < total; ++i) {
        const uint64_t t0 = mono_ns();
        RT(cudaEventRecord(e0, stream));
        spin<<<blocks, 32, 0, stream>>>(1000ull * a.kernel_us, d_stamps);
        RT(cudaGetLastError());
        RT(cudaEventRecord(e1, stream));
        RT(cudaStreamSynchronize(stream));
        const uint64_t t1 = mono_ns();
        float ms = 0;
        RT(cudaEventElapsedTime(&ms, e0, e1));
        RT(cudaMemcpy(stamps.data(), d_stamps, sizeof(unsigned long long) * stamps.size(),
                      cudaMemcpyDeviceToHost));
        unsigned long long gmin = ~0ull, gmax = 0;
        for (int b = 0; b < blocks; ++b) {
            gmin = std::min(gmin, stamps[2 * b]);
            gmax = std::max(gmax, stamps[2 * b + 1]);
        }
        std::fprintf(f,
                     "{\"i\":%u,\"warmup\":%s,\"t0\":%llu,\"t1\":%llu,\"event_us\":%.3f,"
                     "\"gt_start\":%llu,\"gt_end\":%llu}\n",
                     i, i < a.warmup ? "true" : "false", (unsigned long long)t0,
                     (unsigned long long)t1, ms * 1000.0, gmin, gmax);
        sleep_us(a.gap_us);
    }
    sleep_us(20000);
    std::fclose(f);
    RT(cudaFree(d_stamps));
    return 0;
}

// ------------------------------------------------------------------ main ---

void usage() {
    std::fprintf(stderr,
                 "usage: probe devices\n"
                 "       probe sample --interval-ns N [--metrics a,b] --out FILE [--sysclk]\n"
                 "             [--hw-buffer-mb M] [--max-samples S] [--decode-ms T] [--no-context]\n"
                 "             [--list-metrics] [--handshake] [--eval-budget-s S] -- COMMAND...\n"
                 "       probe workload --kernel-us D --count N --gap-us G --out FILE [--blocks B]\n");
}

unsigned long long parse_num(const char* s, const char* flag) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (errno || !end || *end) {
        std::fprintf(stderr, "probe: bad number for %s: %s\n", flag, s);
        std::exit(64);
    }
    return v;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        usage();
        return 64;
    }
    const std::string role = argv[1];
    auto need = [&](int i) {
        if (i + 1 >= argc) {
            std::fprintf(stderr, "probe: %s needs a value\n", argv[i]);
            std::exit(64);
        }
        return argv[i + 1];
    };
    if (role == "devices") {
        init_driver_or_exit();
        int count = 0;
        CU(cuDeviceGetCount(&count));
        std::printf("%d CUDA device(s)\n", count);
        return 0;
    }
    if (role == "sample") {
        SampleArgs a;
        int i = 2;
        for (; i < argc; ++i) {
            const std::string f = argv[i];
            if (f == "--") { ++i; break; }
            if (f == "--interval-ns") a.interval_ns = parse_num(need(i), argv[i]), ++i;
            else if (f == "--metrics") a.metrics = split_commas(need(i)), ++i;
            else if (f == "--out") a.out = need(i), ++i;
            else if (f == "--hw-buffer-mb") a.hw_buffer_mb = parse_num(need(i), argv[i]), ++i;
            else if (f == "--max-samples") a.max_samples = uint32_t(parse_num(need(i), argv[i])), ++i;
            else if (f == "--decode-ms") a.decode_ms = unsigned(parse_num(need(i), argv[i])), ++i;
            else if (f == "--sysclk") a.sysclk = true;
            else if (f == "--no-context") a.own_context = false;
            else if (f == "--list-metrics") a.list_metrics = true;
            else if (f == "--handshake") a.handshake = true;
            else if (f == "--eval-budget-s") a.eval_budget_s = unsigned(parse_num(need(i), argv[i])), ++i;
            else { std::fprintf(stderr, "probe: unknown flag %s\n", f.c_str()); usage(); return 64; }
        }
        for (; i < argc; ++i) a.command.push_back(argv[i]);
        if (!a.list_metrics && (a.out.empty() || a.command.empty() || a.metrics.empty())) {
            usage();
            return 64;
        }
        return run_sample(a);
    }
    if (role == "workload") {
        WorkloadArgs a;
        for (int i = 2; i < argc; ++i) {
            const std::string f = argv[i];
            if (f == "--kernel-us") a.kernel_us = unsigned(parse_num(need(i), argv[i])), ++i;
            else if (f == "--count") a.count = unsigned(parse_num(need(i), argv[i])), ++i;
            else if (f == "--gap-us") a.gap_us = unsigned(parse_num(need(i), argv[i])), ++i;
            else if (f == "--blocks") a.blocks = int(parse_num(need(i), argv[i])), ++i;
            else if (f == "--warmup") a.warmup = unsigned(parse_num(need(i), argv[i])), ++i;
            else if (f == "--out") a.out = need(i), ++i;
            else { std::fprintf(stderr, "probe: unknown flag %s\n", f.c_str()); usage(); return 64; }
        }
        if (a.out.empty()) {
            usage();
            return 64;
        }
        return run_workload(a);
    }
    usage();
    return 64;
}
