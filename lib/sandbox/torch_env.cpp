// Torch discovery. The interpreter is asked, not guessed: Debian's python3-torch and a pip wheel lay
// their headers and libraries out differently, and only the interpreter knows which it has. The
// answer is cached under a key made of the interpreter's and torch's file identities (path, size,
// mtime), so an upgrade of either asks again.
#include "cudaagent/sandbox/torch_env.h"

#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "cudaagent/base/files.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/sandbox/process.h"

namespace cudaagent {
namespace {

std::string file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return path + ":missing";
  return path + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

std::string resolve_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

Result<std::vector<std::string>> string_array(simdjson::dom::object object, const char* key) {
  simdjson::dom::array array;
  if (object[key].get_array().get(array)) {
    return Status::error(std::string("torch discovery: '") + key + "' is not an array");
  }
  std::vector<std::string> out;
  for (auto item : array) {
    std::string_view text;
    if (item.get_string().get(text)) {
      return Status::error(std::string("torch discovery: '") + key + "' holds a non-string");
    }
    out.emplace_back(text);
  }
  return out;
}

}  // namespace

std::vector<std::string> python_candidates(const std::string& requested) {
  if (!requested.empty()) return {requested};
  std::vector<std::string> out;
  if (const char* env = std::getenv("CUDAAGENT_PYTHON"); env != nullptr && *env != '\0') {
    out.emplace_back(env);
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && ::access((dir + "/python3").c_str(), X_OK) == 0) {
      out.push_back(dir + "/python3");
    }
  }
  out.emplace_back("/usr/bin/python3");
  return out;
}

Result<TorchEnv> parse_torch_env(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(json).get(object)) return Status::error("torch discovery: not a JSON object");
  TorchEnv env;
  env.json = json;
  const auto text = [&](const char* key, std::string& out) -> Status {
    std::string_view value;
    if (object[key].get_string().get(value)) {
      return Status::error(std::string("torch discovery: '") + key + "' missing");
    }
    out = std::string(value);
    return Status::ok();
  };
  for (auto [key, field] :
       {std::pair{"python", &env.python}, {"python_version", &env.python_version},
        {"torch_version", &env.torch_version}, {"torch_cuda", &env.torch_cuda},
        {"extension_suffix", &env.extension_suffix}, {"gpu_name", &env.gpu_name},
        {"gpu_arch", &env.gpu_arch}}) {
    if (auto status = text(key, *field); !status) return status;
  }
  for (auto [key, field] : {std::pair{"include_paths", &env.include_paths}, {"prefixes", &env.prefixes},
                            {"library_paths", &env.library_paths}, {"libraries", &env.libraries}}) {
    auto values = string_array(object, key);
    if (!values) return values.status();
    *field = std::move(values).value();
  }
  if (object["cxx11_abi"].get_bool().get(env.cxx11_abi) ||
      object["cuda_available"].get_bool().get(env.cuda_available)) {
    return Status::error("torch discovery: 'cxx11_abi'/'cuda_available' missing");
  }
  // Absent from the answers of older discovery scripts: then unknown (0).
  std::int64_t memory = 0;
  if (simdjson::dom::element element; !object["gpu_memory_bytes"].get(element) &&
                                      (element.get_int64().get(memory) || memory < 0)) {
    return Status::error("torch discovery: 'gpu_memory_bytes' is not a byte count");
  }
  env.gpu_memory_bytes = static_cast<std::uint64_t>(memory);
  return env;
}

Result<TorchEnv> discover_torch(const std::string& python, const std::string& cache) {
  const std::string resolved = resolve_in_path(python);
  if (resolved.empty()) return Status::error("cannot find '" + python + "' in PATH");
  const std::string script = share_dir() + "/harness/discover_torch.py";
  const std::string key =
      Sha256().add_part(file_identity(resolved)).add_part(file_identity(script)).hex_digest();
  const std::string cache_file = cache.empty() ? std::string() : cache + "/torch-" + key + ".json";
  std::string cached;
  if (!cache_file.empty() && read_whole_file(cache_file, cached)) {
    if (auto env = parse_torch_env(cached)) return env;
  }
  ProcessSpec spec;
  spec.argv = {resolved, "-I", script};
  spec.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LC_ALL=C.UTF-8"};
  if (const char* cuda = std::getenv("CUDA_VISIBLE_DEVICES")) {
    spec.env.push_back(std::string("CUDA_VISIBLE_DEVICES=") + cuda);
  }
  spec.timeout_seconds = 120;
  auto run = run_process(spec);
  if (!run) return run.status();
  const ProcessResult& result = run.value();
  if (result.outcome != ProcessResult::Outcome::kExited || result.exit_code != 0) {
    std::string last = result.err;
    while (!last.empty() && last.back() == '\n') last.pop_back();
    if (const auto cut = last.rfind('\n'); cut != std::string::npos) last = last.substr(cut + 1);
    return Status::error("'" + resolved + "' cannot import torch (" + result.describe() +
                         (last.empty() ? ")" : "): " + last));
  }
  auto env = parse_torch_env(result.out);
  if (env && !cache_file.empty()) (void)write_file_atomically(cache_file, result.out);
  return env;
}

Result<TorchEnv> find_torch(const std::string& requested, const std::string& cache) {
  std::string errors;
  for (const std::string& python : python_candidates(requested)) {
    auto env = discover_torch(python, cache);
    if (env) return env;
    errors += (errors.empty() ? "" : "; ") + env.status().message();
  }
  return Status::error("no Python with torch found: " + errors);
}

Result<TorchEnv> find_torch_for_device(const std::string& requested, const std::string& cache_dir,
                                       const std::string& device) {
  auto torch = find_torch(requested, cache_dir);
  if (!torch) return torch.status();
  if (device == "cuda" && !torch.value().cuda_available) {
    return Status::error("--device cuda, but torch " + torch.value().torch_version + " in '" +
                         torch.value().python + "' sees no GPU (use --device cpu for CPU tasks)");
  }
  return torch;
}

}  // namespace cudaagent
