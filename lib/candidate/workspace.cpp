// Workspace snapshots (workspace.h). Every entry is opened by one name relative to its parent's
// open descriptor, so no path is resolved twice and no symbolic link is followed; what is read is
// decided by fstat on the open descriptor. One classification by name serves both the folder walk
// and the files-map form, so both apply exactly the same policy.
#include "cudaagent/candidate/workspace.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <system_error>
#include <tuple>
#include <utility>

#include "cudaagent/base/errno_text.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/base/unique_fd.h"
#include "workspace_names.h"

namespace cudaagent {
namespace {

using namespace workspace_names;  // the naming and classification rules (workspace_names.h)

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};
using UniqueDir = std::unique_ptr<DIR, DirCloser>;

// ---- Building a snapshot -----------------------------------------------------------------------

// Collects the snapshot and applies the byte limits; shared by both forms.
class Collector {
 public:
  Collector(const SnapshotLimits& limits, const ProtectedFiles& protected_files)
      : limits_(limits), protected_(protected_files) {}

  void finding(std::string_view rule, std::string_view path, std::string detail) {
    snapshot_.findings.push_back({std::string(rule), printable(path), std::move(detail)});
  }
  void ignore(std::string_view path, bool is_dir) {
    snapshot_.ignored.push_back(printable(path) + (is_dir ? "/" : ""));
  }

  // Counts one entry; false (with one finding) once the limit is passed.
  bool count_entry(std::string_view path) {
    if (++entries_ <= limits_.max_files) return true;
    if (!over_count_) {
      over_count_ = true;
      finding(kRuleTooManyFiles, path,
              "more than " + std::to_string(limits_.max_files) +
                  " entries; the rest was not looked at");
    }
    return false;
  }
  bool over_count() const { return over_count_; }

  // Whether a candidate file of `size` bytes may be read; records the finding when not.
  bool admit_size(std::string_view path, std::size_t size) {
    if (size > limits_.max_file_bytes) {
      finding(kRuleFileTooLarge, path,
              std::to_string(size) + " bytes, limit " + std::to_string(limits_.max_file_bytes));
      return false;
    }
    if (size > limits_.max_total_bytes - std::min(total_, limits_.max_total_bytes)) {
      finding(
          kRuleWorkspaceTooLarge, path,
          "candidate files pass " + std::to_string(limits_.max_total_bytes) + " bytes together");
      return false;
    }
    return true;
  }

  void add_candidate(std::string path, std::string bytes) {
    total_ += bytes.size();
    snapshot_.files.emplace(std::move(path), std::move(bytes));
  }

  // A workspace copy of a protected file is fine only when it is byte-identical to the pristine
  // copy or to an accepted original.
  void check_protected(const std::string& path, std::string_view bytes) {
    bool same = protected_.pristine.at(path) == bytes;
    if (!same) {
      const auto accepted = protected_.accepted_sha256.find(path);
      if (accepted != protected_.accepted_sha256.end()) {
        const std::string digest = sha256_hex(bytes);
        same = std::find(accepted->second.begin(), accepted->second.end(), digest) !=
               accepted->second.end();
      }
    }
    if (same) {
      ignore(path, false);
    } else {
      protected_edited(path);
    }
  }
  void protected_edited(std::string_view path) {
    finding(kRuleProtectedFileEdited, path,
            "differs from the pristine copy, which is used instead");
  }

  Snapshot finish() && {
    std::sort(snapshot_.ignored.begin(), snapshot_.ignored.end());
    std::sort(snapshot_.findings.begin(), snapshot_.findings.end(),
              [](const PolicyFinding& a, const PolicyFinding& b) {
                return std::tie(a.path, a.rule, a.detail) < std::tie(b.path, b.rule, b.detail);
              });
    Sha256 hash;
    for (const auto& [name, bytes] : snapshot_.files) hash.add_part(name).add_part(bytes);
    snapshot_.content_hash = hash.hex_digest();
    return std::move(snapshot_);
  }

  const SnapshotLimits& limits() const { return limits_; }
  const ProtectedFiles& protected_files() const { return protected_; }

 private:
  const SnapshotLimits& limits_;
  const ProtectedFiles& protected_;
  Snapshot snapshot_;
  std::size_t entries_ = 0;
  std::size_t total_ = 0;
  bool over_count_ = false;
};

// ---- Folder walk -------------------------------------------------------------------------------

// openat2 refuses symbolic links anywhere in the lookup and anything outside the parent even if a
// future caller passes more than one component; openat with O_NOFOLLOW covers the one-component
// names used here. The first call probes: a kernel or seccomp filter without openat2 answers
// ENOSYS/EPERM/E2BIG/EINVAL, and the walk stays on openat from then on.
class Opener {
 public:
  int open(int dir_fd, const char* name, int flags) {
#if defined(SYS_openat2) && defined(RESOLVE_BENEATH)
    if (use_openat2_) {
      open_how how{};
      how.flags = static_cast<std::uint64_t>(flags);
      how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
      const long fd = ::syscall(SYS_openat2, dir_fd, name, &how, sizeof how);
      if (fd >= 0 || (errno != ENOSYS && errno != EPERM && errno != E2BIG && errno != EINVAL)) {
        return static_cast<int>(fd);
      }
      use_openat2_ = false;
    }
#endif
    return ::openat(dir_fd, name, flags);
  }

 private:
  bool use_openat2_ = true;
};

enum class Kind { kRegular, kDir, kSymlink, kDevice, kOtherSpecial, kUnknown };

Kind kind_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return Kind::kRegular;
  if (S_ISDIR(mode)) return Kind::kDir;
  if (S_ISLNK(mode)) return Kind::kSymlink;
  if (S_ISCHR(mode) || S_ISBLK(mode)) return Kind::kDevice;
  return Kind::kOtherSpecial;
}

std::string describe_mode(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder, not a regular file";
  if (S_ISFIFO(mode)) return "a FIFO, not a regular file";
  if (S_ISSOCK(mode)) return "a socket, not a regular file";
  if (S_ISCHR(mode)) return "a character device, not a regular file";
  if (S_ISBLK(mode)) return "a block device, not a regular file";
  return "not a regular file";
}

// The entry's type as listed, without opening it; only used to report and to pick a path through
// the walk, never to decide what is read (that is fstat on the opened descriptor).
Kind listed_kind(int dir_fd, const dirent& entry) {
  switch (entry.d_type) {
    case DT_REG:
      return Kind::kRegular;
    case DT_DIR:
      return Kind::kDir;
    case DT_LNK:
      return Kind::kSymlink;
    case DT_CHR:
    case DT_BLK:
      return Kind::kDevice;
    case DT_FIFO:
    case DT_SOCK:
      return Kind::kOtherSpecial;
    default:
      break;
  }
  struct stat st {};
  if (::fstatat(dir_fd, entry.d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) return Kind::kUnknown;
  return kind_of_mode(st.st_mode);
}

// Reads at most limit + 1 bytes, so that a file that grew past the limit shows as longer than it.
// Returns 0 or an errno value.
int read_bounded(int fd, std::size_t limit, std::string& out) {
  out.clear();
  const std::size_t want = limit + 1;
  char buffer[64 * 1024];
  while (out.size() < want) {
    const ssize_t n = ::read(fd, buffer, std::min(sizeof buffer, want - out.size()));
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      return 0;
    } else if (errno != EINTR) {
      return errno;
    }
  }
  return 0;
}

std::string hard_link_detail(nlink_t links) {
  return "a regular file with " + std::to_string(links) +
         " links (a hard link); not read: its bytes may not be the agent's to read";
}

// An unexpected file (it could mean code): a name with bytes outside [A-Za-z0-9._-] says so too.
void report_unexpected(Collector& out, std::string_view path, std::string_view leaf,
                       std::string reason) {
  if (std::string problem = strict_name_problem(leaf); !problem.empty()) {
    out.finding(kRuleBadName, path, problem + "; " + reason);
  } else {
    out.finding(kRuleUnexpectedFile, path, std::move(reason));
  }
}

class Walker {
 public:
  explicit Walker(Collector& collector) : out_(collector) {}

  // Lists `dir`, which is `path` with `depth` components.
  void visit_dir(UniqueDir dir, const std::string& path, std::size_t depth) {
    const int fd = ::dirfd(dir.get());
    if (depth + 1 > out_.limits().max_depth) {
      if (has_entries(dir.get())) {
        out_.finding(kRuleTooDeep, path,
                     "holds entries deeper than " + std::to_string(out_.limits().max_depth) +
                         " path components; they were not looked at");
      }
      return;
    }
    // Sorted, so that findings and the ignored list do not depend on the file system's order.
    std::vector<std::pair<std::string, Kind>> entries;
    errno = 0;
    while (const dirent* entry = ::readdir(dir.get())) {
      const std::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      if (!out_.count_entry(join(path, name))) break;
      entries.emplace_back(std::string(name), listed_kind(fd, *entry));
      errno = 0;
    }
    if (errno != 0 && !out_.over_count()) {
      out_.finding(kRuleUnreadable, path, "cannot list: " + errno_text(errno));
    }
    std::sort(entries.begin(), entries.end());
    for (const auto& [name, kind] : entries) visit_entry(fd, path, depth + 1, name, kind);
  }

 private:
  static std::string join(const std::string& dir, std::string_view name) {
    return dir.empty() ? std::string(name) : dir + "/" + std::string(name);
  }

  static bool has_entries(DIR* dir) {
    while (const dirent* entry = ::readdir(dir)) {
      const std::string_view name = entry->d_name;
      if (name != "." && name != "..") return true;
    }
    return false;
  }

  // Records a symbolic link or special file that was not opened; true when it was one.
  bool report_not_plain(const std::string& path, Kind kind) {
    switch (kind) {
      case Kind::kSymlink:
        out_.finding(kRuleSymlink, path, "symbolic link (not followed)");
        return true;
      case Kind::kDevice:
        out_.finding(kRuleSpecialFile, path, "a device, not a regular file");
        return true;
      case Kind::kOtherSpecial:
        out_.finding(kRuleSpecialFile, path, "a FIFO or socket, not a regular file");
        return true;
      case Kind::kUnknown:
        out_.finding(kRuleUnreadable, path, "cannot tell what it is");
        return true;
      default:
        return false;
    }
  }

  void visit_entry(int dir_fd, const std::string& dir_path, std::size_t depth,
                   const std::string& name, Kind kind) {
    const std::string path = join(dir_path, name);
    const bool is_dir = kind == Kind::kDir;
    if (is_hidden(name)) {
      if (!report_not_plain(path, kind)) out_.ignore(path, is_dir);
      return;
    }
    if (std::string problem = hard_name_problem(name, out_.limits().max_name_bytes);
        !problem.empty()) {
      out_.finding(kRuleBadName, path, std::move(problem));
      return;
    }
    if (matches_prefix(path, is_dir, out_.protected_files().protected_prefixes) ||
        is_build_output(path, is_dir)) {
      if (!report_not_plain(path, kind)) out_.ignore(path, is_dir);
      return;
    }
    if (is_dir) {
      if (out_.over_count()) return;
      UniqueFd sub(
          opener_.open(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub.is_open()) {
        report_open_error(path, errno);
        return;
      }
      UniqueDir listing(::fdopendir(sub.get()));
      if (!listing) {
        out_.finding(kRuleUnreadable, path, "cannot list: " + errno_text(errno));
        return;
      }
      sub.release();  // now owned by `listing`
      visit_dir(std::move(listing), path, depth);
      return;
    }
    Classified cls = classify_file(path, out_.protected_files());
    if (cls.use == Use::kCandidate || cls.use == Use::kProtected) {
      // Opened even when listed as a link or FIFO: the no-follow, non-blocking open and fstat on
      // the descriptor are what decide. Devices are never opened (opening some has side effects).
      if (kind == Kind::kDevice) {
        report_not_plain(path, kind);
      } else {
        read_file(dir_fd, path, name, cls.use);
      }
      return;
    }
    if (report_not_plain(path, kind) || report_hard_link(dir_fd, path, name)) return;
    if (cls.use == Use::kUnexpected) {
      report_unexpected(out_, path, name, std::move(cls.detail));
    } else {
      out_.ignore(path, false);
    }
  }

  // Records a regular file with more than one link; true when it was one (or could not be told).
  bool report_hard_link(int dir_fd, const std::string& path, const std::string& name) {
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      out_.finding(kRuleUnreadable, path, "cannot stat: " + errno_text(errno));
      return true;
    }
    if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
      out_.finding(kRuleHardLink, path, hard_link_detail(st.st_nlink));
      return true;
    }
    return false;
  }

  void report_open_error(const std::string& path, int error) {
    if (error == ELOOP) {
      out_.finding(kRuleSymlink, path, "symbolic link (not followed)");
    } else {
      out_.finding(kRuleUnreadable, path, "cannot open: " + errno_text(error));
    }
  }

  void read_file(int dir_fd, const std::string& path, const std::string& name, Use use) {
    UniqueFd fd(opener_.open(dir_fd, name.c_str(),
                             O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    if (!fd.is_open()) {
      report_open_error(path, errno);
      return;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
      out_.finding(kRuleUnreadable, path, "cannot stat: " + errno_text(errno));
      return;
    }
    if (!S_ISREG(st.st_mode)) {
      out_.finding(kRuleSpecialFile, path, describe_mode(st.st_mode));
      return;
    }
    if (st.st_nlink > 1) {
      out_.finding(kRuleHardLink, path, hard_link_detail(st.st_nlink));
      return;
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    std::string bytes;
    if (use == Use::kProtected) {
      // Bounded like a candidate file: anything larger cannot be an accepted copy.
      const std::size_t cap = out_.limits().max_file_bytes;
      if (size > cap) {
        out_.protected_edited(path);
      } else if (const int error = read_bounded(fd.get(), cap, bytes); error != 0) {
        out_.finding(kRuleUnreadable, path, "cannot read: " + errno_text(error));
      } else if (bytes.size() > cap) {
        out_.protected_edited(path);
      } else {
        out_.check_protected(path, bytes);
      }
      return;
    }
    if (!out_.admit_size(path, size)) return;
    if (const int error = read_bounded(fd.get(), out_.limits().max_file_bytes, bytes); error != 0) {
      out_.finding(kRuleUnreadable, path, "cannot read: " + errno_text(error));
      return;
    }
    if (bytes.size() > out_.limits().max_file_bytes) {
      out_.finding(kRuleFileTooLarge, path, "grew past the limit while being read");
      return;
    }
    if (bytes.size() != size && !out_.admit_size(path, bytes.size())) return;
    out_.add_candidate(path, std::move(bytes));
  }

  Collector& out_;
  Opener opener_;
};

// ---- Files map ---------------------------------------------------------------------------------

// Problems with the shape of an untrusted relative name (before any per-component check).
std::string path_shape_problem(std::string_view name) {
  if (name.empty()) return "empty name";
  if (name.front() == '/') return "absolute path";
  if (name.find('\0') != std::string_view::npos) return "name contains a NUL byte";
  if (name.find('\\') != std::string_view::npos) return "name contains a backslash";
  for (std::string_view part : split_path(name)) {
    if (part.empty()) return "empty path component";
    if (part == "." || part == "..") return "'.' and '..' are not allowed";
  }
  return {};
}

void add_from_map(Collector& out, const std::string& name, const std::string& bytes) {
  if (std::string problem = path_shape_problem(name); !problem.empty()) {
    out.finding(kRuleBadName, name, std::move(problem));
    return;
  }
  const std::vector<std::string_view> parts = split_path(name);
  if (std::any_of(parts.begin(), parts.end(), is_hidden)) {
    out.ignore(name, false);
    return;
  }
  for (std::string_view part : parts) {
    if (std::string problem = hard_name_problem(part, out.limits().max_name_bytes);
        !problem.empty()) {
      out.finding(kRuleBadName, name, std::move(problem));
      return;
    }
  }
  if (parts.size() > out.limits().max_depth) {
    out.finding(kRuleTooDeep, name,
                "deeper than " + std::to_string(out.limits().max_depth) + " path components");
    return;
  }
  if (matches_prefix(name, false, out.protected_files().protected_prefixes) ||
      is_build_output(name, false)) {
    out.ignore(name, false);
    return;
  }
  Classified cls = classify_file(name, out.protected_files());
  switch (cls.use) {
    case Use::kProtected:
      out.check_protected(name, bytes);
      break;
    case Use::kCandidate:
      if (out.admit_size(name, bytes.size())) out.add_candidate(name, bytes);
      break;
    case Use::kUnexpected:
      report_unexpected(out, name, parts.back(), std::move(cls.detail));
      break;
    case Use::kIgnored:
      out.ignore(name, false);
      break;
  }
}

// ---- Materialize -------------------------------------------------------------------------------

Status write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::error(errno_text(errno));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return Status::ok();
}

// Creates `name` (already checked) under the folder `root_fd`, creating folders on the way.
Status write_one(int root_fd, const std::string& name, std::string_view bytes) {
  const std::vector<std::string_view> parts = split_path(name);
  UniqueFd parent;
  int parent_fd = root_fd;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string part(parts[i]);
    if (::mkdirat(parent_fd, part.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::error("cannot create folder: " + errno_text(errno));
    }
    UniqueFd sub(
        ::openat(parent_fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub.is_open()) return Status::error("cannot open folder: " + errno_text(errno));
    // The umask may have taken bits that the build needs; these folders are private anyway.
    if (::fchmod(sub.get(), 0700) != 0) return Status::error("cannot chmod: " + errno_text(errno));
    parent = std::move(sub);
    parent_fd = parent.get();
  }
  const std::string leaf(parts.back());
  UniqueFd fd(::openat(parent_fd, leaf.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600));
  if (!fd.is_open()) return Status::error("cannot create: " + errno_text(errno));
  if (::fchmod(fd.get(), 0600) != 0) return Status::error("cannot chmod: " + errno_text(errno));
  if (Status s = write_all(fd.get(), bytes); !s) return s;
  if (::close(fd.release()) != 0) return Status::error("cannot close: " + errno_text(errno));
  return Status::ok();
}

// A materialized name must be one the policy would have accepted, whoever built the Snapshot.
std::string materialize_name_problem(const std::string& name) {
  if (std::string problem = path_shape_problem(name); !problem.empty()) return problem;
  for (std::string_view part : split_path(name)) {
    if (std::string problem = name_problem(part, 255); !problem.empty()) return problem;
  }
  return {};
}

// Opens `dest_dir` as a fresh or empty private folder of ours.
Result<UniqueFd> open_destination(const std::string& dest_dir) {
  const std::string quoted = "'" + dest_dir + "'";
  if (::mkdir(dest_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::error("cannot create " + quoted + ": " + errno_text(errno));
  }
  UniqueFd fd(::open(dest_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.is_open()) return Status::error("cannot open " + quoted + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return Status::error("cannot stat " + quoted + ": " + errno_text(errno));
  if (st.st_uid != ::geteuid()) return Status::error(quoted + " belongs to another user");
  UniqueFd listing(::dup(fd.get()));
  UniqueDir dir(listing.is_open() ? ::fdopendir(listing.get()) : nullptr);
  if (!dir) return Status::error("cannot list " + quoted + ": " + errno_text(errno));
  listing.release();
  while (const dirent* entry = ::readdir(dir.get())) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") return Status::error(quoted + " is not empty");
  }
  if (::fchmod(fd.get(), 0700) != 0)
    return Status::error("cannot chmod " + quoted + ": " + errno_text(errno));
  return fd;
}

}  // namespace

ProtectedFiles standard_protected_files(std::string model_py, std::string binding_cpp,
                                        std::string binding_registry_h) {
  ProtectedFiles files;
  files.pristine.emplace("model.py", std::move(model_py));
  files.pristine.emplace("binding.cpp", std::move(binding_cpp));
  files.pristine.emplace("binding_registry.h", std::move(binding_registry_h));
  // SHA-256 of binding.cpp and binding_registry.h as released in CUDA Agent's agent_workdir/.
  files.accepted_sha256["binding.cpp"] = {
      "43da662b9aedb537a4cb2f04c57d92aeddbe018a9b5f7374ae28ec9bba0b3b62"};
  files.accepted_sha256["binding_registry.h"] = {
      "a829ca7d5de03049c439f30aa01f7f631c06418c31855cf19a67f23d69349e0f"};
  files.protected_prefixes = {"utils/", "SKILL.md"};
  return files;
}

Result<Snapshot> snapshot_workspace(const std::string& dir, const SnapshotLimits& limits,
                                    const ProtectedFiles& protected_files) {
  // The root is named by the trusted caller, but its last component may have been swapped for a
  // link by whoever can write its parent: O_NOFOLLOW refuses that too.
  UniqueFd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.is_open()) {
    const int error = errno;
    struct stat st {};
    const bool is_link = ::lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
    return Status::error("cannot open workspace '" + dir +
                         "': " + (is_link ? std::string("is a symbolic link") : errno_text(error)));
  }
  UniqueDir listing(::fdopendir(root.get()));
  if (!listing) return Status::error("cannot list workspace '" + dir + "': " + errno_text(errno));
  root.release();  // now owned by `listing`
  Collector collector(limits, protected_files);
  Walker(collector).visit_dir(std::move(listing), "", 0);
  return std::move(collector).finish();
}

Result<Snapshot> snapshot_from_files(const std::map<std::string, std::string>& files,
                                     const SnapshotLimits& limits,
                                     const ProtectedFiles& protected_files) {
  Collector collector(limits, protected_files);
  for (const auto& [name, bytes] : files) {
    if (!collector.count_entry(name)) break;
    add_from_map(collector, name, bytes);
  }
  return std::move(collector).finish();
}

Status materialize(const Snapshot& snapshot, const ProtectedFiles& protected_files,
                   const std::string& dest_dir) {
  std::map<std::string, std::string_view> plan;
  for (const auto& [name, bytes] : protected_files.pristine) {
    if (std::string problem = materialize_name_problem(name); !problem.empty()) {
      return Status::error("protected file '" + printable(name) + "': " + problem);
    }
    plan.emplace(name, bytes);
  }
  for (const auto& [name, bytes] : snapshot.files) {
    if (std::string problem = materialize_name_problem(name); !problem.empty()) {
      return Status::error("snapshot file '" + printable(name) + "': " + problem);
    }
    if (!is_candidate_file(name)) {
      return Status::error("snapshot file '" + printable(name) + "' is not a candidate file");
    }
    if (!plan.emplace(name, bytes).second) {
      return Status::error("snapshot file '" + printable(name) + "' is a protected file");
    }
  }
  Result<UniqueFd> root = open_destination(dest_dir);
  if (!root) return root.status();
  for (const auto& [name, bytes] : plan) {
    if (Status s = write_one(root.value().get(), name, bytes); !s) {
      return s.with_context("writing '" + dest_dir + "/" + name + "'");
    }
  }
  return Status::ok();
}

}  // namespace cudaagent
