// An episode's folder. The protected files are written read-only here and bound read-only into the
// sandbox; the evaluator never trusts them anyway (it takes model.py from the task and the glue
// from share/), so their protection is for the agent's own honest runs.
#include "episode_workspace.h"

#include <sys/stat.h>

#include <filesystem>

#include "cudaagent/base/files.h"

namespace cudaagent::rollout::detail {
namespace {

Status write_file(const std::string& path, const std::string& bytes, unsigned mode) {
  if (!write_file_atomically(path, bytes)) return Status::error("cannot write '" + path + "'");
  if (::chmod(path.c_str(), mode) != 0) return Status::error("cannot set the mode of '" + path + "'");
  return Status::ok();
}

Status copy_file(const std::string& from, const std::string& to, unsigned mode) {
  std::string bytes;
  if (!read_whole_file(from, bytes)) return Status::error("cannot read '" + from + "'");
  return write_file(to, bytes, mode);
}

}  // namespace

Result<EpisodeFolders> make_episode_folders(const std::string& work_dir, const std::string& model_py,
                                            const std::string& skill_text, const std::string& share) {
  auto root = make_private_dir(work_dir, "cudaagent-episode");
  if (!root) return root.status();
  EpisodeFolders f;
  f.root = root.value();
  // The sandbox may run as another user; the folders it needs are opened to it, the scratch is not.
  (void)::chmod(f.root.c_str(), 0711);
  f.workspace = f.root + "/workspace";
  f.eval_dir = f.root + "/eval";
  f.socket = f.eval_dir + "/sock";
  f.scratch = f.root + "/shell";
  for (const auto& [dir, mode] : {std::pair{f.workspace, 0755u}, std::pair{f.workspace + "/kernels", 0755u},
                                  std::pair{f.workspace + "/utils", 0755u}, std::pair{f.eval_dir, 0755u},
                                  std::pair{f.scratch, 0700u}}) {
    if (!make_directories(dir, mode)) return Status::error("cannot create '" + dir + "'");
  }
  const std::string& ws = f.workspace;
  for (Status s :
       {write_file(ws + "/model.py", model_py, 0444), write_file(ws + "/SKILL.md", skill_text, 0444),
        copy_file(share + "/workspace/binding.cpp", ws + "/binding.cpp", 0444),
        copy_file(share + "/workspace/binding_registry.h", ws + "/binding_registry.h", 0444),
        write_file(ws + "/utils/eval_socket", f.socket + "\n", 0444)}) {
    if (!s) return s;
  }
  for (const char* name :
       {"__init__.py", "eval_client.py", "verification.py", "profiling.py", "compile.sh"}) {
    if (auto s = copy_file(share + "/rollout/utils/" + name, ws + "/utils/" + name, 0444); !s) return s;
  }
  (void)::chmod((ws + "/utils").c_str(), 0555);
  return f;
}

}  // namespace cudaagent::rollout::detail
