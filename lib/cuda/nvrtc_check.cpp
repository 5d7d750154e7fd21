// check_cuda_sources: NVRTC on each kernels/*.cu, with in-memory headers only (see the header).
#include "cudaagent/cuda/nvrtc_check.h"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <thread>

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

// Stand-ins for the host headers kernel files commonly include. Under NVRTC the math and printf
// functions are built in; integer types come from libcu++.
const std::map<std::string, std::string>& stand_ins() {
  static const std::map<std::string, std::string> headers = [] {
    const std::string ints =
        "#pragma once\n#include <cuda/std/cstdint>\n#include <cuda/std/cstddef>\n"
        "using cuda::std::int8_t; using cuda::std::int16_t; using cuda::std::int32_t;\n"
        "using cuda::std::int64_t; using cuda::std::uint8_t; using cuda::std::uint16_t;\n"
        "using cuda::std::uint32_t; using cuda::std::uint64_t; using cuda::std::uintptr_t;\n"
        "using cuda::std::intptr_t;\n"
        "namespace std { using cuda::std::int8_t; using cuda::std::int16_t; "
        "using cuda::std::int32_t; using cuda::std::int64_t; using cuda::std::uint8_t; "
        "using cuda::std::uint16_t; using cuda::std::uint32_t; using cuda::std::uint64_t; "
        "using cuda::std::uintptr_t; using cuda::std::intptr_t; }\n";
    const std::string empty = "#pragma once\n";
    const std::string limits = "#pragma once\n#include <cuda/std/limits>\n#include <cuda/std/climits>\n"
                               "#include <cuda/std/cfloat>\n";
    return std::map<std::string, std::string>{
        {"cstdint", ints}, {"stdint.h", ints}, {"cstddef", ints}, {"stddef.h", ints},
        {"cuda_runtime.h", empty}, {"cuda_runtime_api.h", empty}, {"cuda.h", empty},
        {"cmath", empty}, {"math.h", empty}, {"cstdio", empty}, {"stdio.h", empty},
        {"cfloat", limits}, {"float.h", limits}, {"climits", limits}, {"limits.h", limits},
    };
  }();
  return headers;
}

struct Include {
  std::string name;
  bool angle = false;
  int line = 0;
};

// The #include directives of `source` (after optional spaces: '#', spaces, "include", spaces, then
// "name" or <name>). A directive in any other form (a macro) is returned with an empty name.
std::vector<Include> includes_of(const std::string& source) {
  std::vector<Include> found;
  std::size_t start = 0;
  int line = 0;
  while (start <= source.size()) {
    ++line;
    std::size_t end = source.find('\n', start);
    if (end == std::string::npos) end = source.size();
    std::string_view text(source.data() + start, end - start);
    std::size_t i = text.find_first_not_of(" \t");
    if (i != std::string_view::npos && text[i] == '#') {
      i = text.find_first_not_of(" \t", i + 1);
      if (i != std::string_view::npos && text.substr(i, 7) == "include") {
        i = text.find_first_not_of(" \t", i + 7);
        Include include{{}, false, line};
        if (i != std::string_view::npos && (text[i] == '"' || text[i] == '<')) {
          const char close = text[i] == '"' ? '"' : '>';
          const std::size_t stop = text.find(close, i + 1);
          if (stop != std::string_view::npos) {
            include.name = std::string(text.substr(i + 1, stop - i - 1));
            include.angle = close == '>';
          }
        }
        found.push_back(include);
      }
    }
    start = end + 1;
  }
  return found;
}

bool safe_name(const std::string& name) {
  return !name.empty() && name.front() != '/' && name.find("..") == std::string::npos &&
         name.find('\\') == std::string::npos;
}

// NVRTC's "kernels/x.cu(15): error: ..." lines as "kernels/x.cu:15: error: ...", first few only.
std::string diagnostics_of(const std::string& log, int max_errors) {
  std::string out;
  int errors = 0;
  std::size_t start = 0;
  while (start < log.size() && errors < max_errors) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(start, end - start);
    start = end + 1;
    const std::size_t error = line.find("): error");
    if (error == std::string::npos) continue;
    const std::size_t open = line.rfind('(', error);
    if (open == std::string::npos) continue;
    out += line.substr(0, open) + ":" + line.substr(open + 1, error - open - 1) +
           line.substr(error + 1) + "\n";
    ++errors;
  }
  return out;
}

CudaFileCheck check_one(const std::string& file, const std::map<std::string, std::string>& files,
                        const NvrtcCheckOptions& options, const std::string& toolkit_include) {
  const auto started = std::chrono::steady_clock::now();
  CudaFileCheck check;
  check.file = file;
  const auto finish = [&]() {
    check.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return check;
  };
  // Resolve every include of the file and, transitively, of the workspace headers it uses.
  std::map<std::string, std::string> headers;  // include name -> source
  std::vector<std::pair<std::string, std::string>> queue{{file, files.at(file)}};
  std::set<std::string> seen{file};
  while (!queue.empty()) {
    const auto [from, source] = queue.back();
    queue.pop_back();
    for (const Include& include : includes_of(source)) {
      const std::string where = from + ":" + std::to_string(include.line);
      if (include.name.empty() || !safe_name(include.name)) {
        check.checkable = false;
        check.diagnostics = where + ": an #include --check cannot follow (a macro, an absolute or "
                                    "'..' path); the full build will judge this file\n";
        return finish();
      }
      if (headers.count(include.name)) continue;
      if (!include.angle) {
        const std::string beside = (fs::path(from).parent_path() / include.name).lexically_normal().string();
        const std::string* found = nullptr;
        if (auto it = files.find(beside); it != files.end()) found = &it->second;
        else if (auto root = files.find(include.name); root != files.end()) found = &root->second;
        if (found != nullptr) {
          headers.emplace(include.name, *found);
          const std::string key = files.count(beside) ? beside : include.name;
          if (seen.insert(key).second) queue.emplace_back(key, *found);
          continue;
        }
      }
      if (auto stand_in = stand_ins().find(include.name); stand_in != stand_ins().end()) {
        headers.emplace(include.name, stand_in->second);
        continue;
      }
      std::error_code error;
      if (fs::is_regular_file(toolkit_include + "/" + include.name, error) ||
          fs::is_regular_file(toolkit_include + "/cccl/" + include.name, error)) {
        continue;  // a toolkit header: NVRTC finds it through -I
      }
      check.checkable = false;
      check.diagnostics = where + ": includes " + (include.angle ? "<" : "\"") + include.name +
                          (include.angle ? ">" : "\"") + ", which --check cannot stand in for; "
                          "the full build will judge this file\n";
      return finish();
    }
  }
  std::vector<const char*> header_sources, header_names;
  for (const auto& [name, source] : headers) {
    header_names.push_back(name.c_str());
    header_sources.push_back(source.c_str());
  }
  nvrtcProgram program = nullptr;
  if (nvrtcCreateProgram(&program, files.at(file).c_str(), file.c_str(),
                         static_cast<int>(headers.size()), header_sources.data(),
                         header_names.data()) != NVRTC_SUCCESS) {
    check.diagnostics = file + ": NVRTC could not create a program\n";
    return finish();
  }
  const std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(&program, [](nvrtcProgram* p) {
    nvrtcDestroyProgram(p);
  });
  const std::string arch = "--gpu-architecture=compute_" + options.arch;
  const std::string include_toolkit = "-I" + toolkit_include;
  const std::string include_cccl = "-I" + toolkit_include + "/cccl";
  const std::vector<const char*> flags = {arch.c_str(), "-std=c++17", "-default-device",
                                          "-rdc=true", include_cccl.c_str(), include_toolkit.c_str()};
  const nvrtcResult result = nvrtcCompileProgram(program, static_cast<int>(flags.size()), flags.data());
  std::size_t log_size = 0;
  std::string log;
  if (nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) log.clear();
    while (!log.empty() && log.back() == '\0') log.pop_back();
  }
  check.ok = result == NVRTC_SUCCESS;
  if (!check.ok) {
    check.diagnostics = diagnostics_of(log, 5);
    if (check.diagnostics.empty()) {
      check.diagnostics = file + ": " + nvrtcGetErrorString(result) + "\n" + log.substr(0, 2000);
    }
  }
  return finish();
}

}  // namespace

Result<std::vector<CudaFileCheck>> check_cuda_sources(const std::map<std::string, std::string>& files,
                                                      const NvrtcCheckOptions& options) {
#ifdef CUDAAGENT_TOOLKIT_INCLUDE_DIR
  const std::string toolkit_include =
      options.toolkit_include.empty() ? CUDAAGENT_TOOLKIT_INCLUDE_DIR : options.toolkit_include;
#else
  const std::string toolkit_include = options.toolkit_include;
#endif
  std::vector<std::string> sources;
  for (const auto& [name, bytes] : files) {
    if (name.rfind("kernels/", 0) == 0 && fs::path(name).extension() == ".cu") sources.push_back(name);
  }
  std::vector<CudaFileCheck> checks(sources.size());
  std::atomic<std::size_t> next{0};
  const auto work = [&]() {
    for (std::size_t i = next++; i < sources.size(); i = next++) {
      checks[i] = check_one(sources[i], files, options, toolkit_include);
    }
  };
  std::vector<std::thread> threads;
  const std::size_t count = std::min<std::size_t>(std::max(options.jobs, 1), sources.size());
  for (std::size_t t = 1; t < count; ++t) threads.emplace_back(work);
  work();
  for (auto& thread : threads) thread.join();
  return checks;
}

}  // namespace cudaagent
