// Workspace snapshots: the trusted side's copy of a candidate workspace, taken by content and by an
// allow-list. Key choice: a snapshot holds only bytes read once through no-follow opens (or given
// as a files map); everything after it (build, harness) sees only those bytes plus pristine
// protected files, so symlinks, races and planted files in the workspace cannot reach the trusted
// side.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

// Rule names of policy findings (stable: they appear in records).
inline constexpr std::string_view kRuleProtectedFileEdited = "protected-file-edited";
inline constexpr std::string_view kRuleSymlink = "symlink";
inline constexpr std::string_view kRuleSpecialFile = "special-file";  // FIFO, device, socket, ...
inline constexpr std::string_view kRuleUnexpectedFile = "unexpected-file";
inline constexpr std::string_view kRuleFileTooLarge = "file-too-large";
inline constexpr std::string_view kRuleWorkspaceTooLarge = "workspace-too-large";
inline constexpr std::string_view kRuleTooManyFiles = "too-many-files";
inline constexpr std::string_view kRuleTooDeep = "too-deep";
inline constexpr std::string_view kRuleBadName = "bad-name";
inline constexpr std::string_view kRuleUnreadable = "unreadable";

// Something in the workspace that breaks the policy. The caller turns any finding into a
// REJECT_POLICY verdict. `path` is relative to the workspace, with bytes outside printable ASCII
// written as \xNN so that it is safe to print.
struct PolicyFinding {
  std::string rule;  // one of the kRule* names
  std::string path;
  std::string detail;  // for people: "symbolic link (not followed)"
};

struct Snapshot {
  // Relative name -> bytes, only the candidate's allowed files: model_new.py, and in kernels/
  // <stem>.cu, <stem>.cuh, <stem>.h, <stem>.cpp (which covers <stem>_binding.cpp), with
  // stem = [A-Za-z0-9_]+. Never a protected file: the harness uses pristine copies.
  std::map<std::string, std::string> files;
  // Harmless entries seen but not used, sorted (.md, .txt, .json, logs, identical protected copies,
  // protected folders such as "utils/", hidden folders such as ".git/"; folders end in '/').
  std::vector<std::string> ignored;
  std::vector<PolicyFinding> findings;
  // Lowercase hex SHA-256 over `files` in name order, each name and then its bytes added with
  // Sha256::add_part. Depends on the candidate files only, not on findings or ignored entries.
  std::string content_hash;
};

struct SnapshotLimits {
  std::size_t max_files = 256;            // entries looked at (files, folders, others), in all
  std::size_t max_file_bytes = 1 << 20;   // per candidate file
  std::size_t max_total_bytes = 8 << 20;  // all candidate files together
  std::size_t max_depth = 4;              // path components, "kernels/a.cu" has 2
  std::size_t max_name_bytes = 128;       // per path component
};

struct ProtectedFiles {
  // Relative name -> pristine bytes: model.py (from the task), binding.cpp, binding_registry.h. A
  // workspace copy must be byte-identical or absent.
  std::map<std::string, std::string> pristine;
  // Other contents accepted for a workspace copy (name -> lowercase hex SHA-256 values), still
  // never used: the CUDA Agent originals of binding.cpp and binding_registry.h, which every
  // unchanged CUDA Agent workspace carries, must not read as edits of ours.
  std::map<std::string, std::vector<std::string>> accepted_sha256;
  // Parts of the workspace that may be present but are never read nor used: "utils/" (a folder) or
  // "SKILL.md" (one entry). A prefix matches whole path components only.
  std::vector<std::string> protected_prefixes;
};

// The usual set: the three pristine files, the CUDA Agent originals of the two binding files as
// accepted copies, and the prefixes "utils/" and "SKILL.md".
ProtectedFiles standard_protected_files(std::string model_py, std::string binding_cpp,
                                        std::string binding_registry_h);

// Walks `dir` without following symbolic links (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS
// when the kernel has it, else openat with O_NOFOLLOW), reads regular files only and only after
// fstat on the open descriptor, never blocks on FIFOs or devices. Returns the snapshot, with a
// finding for everything against the policy; returns a Status only when `dir` itself cannot be
// opened or listed (missing, not a folder, a symbolic link, no permission). Thread-safe (no shared
// state); the cost is bounded by the limits, not by what the workspace holds.
Result<Snapshot> snapshot_workspace(const std::string& dir, const SnapshotLimits& limits,
                                    const ProtectedFiles& protected_files);

// The same rules for a candidate given as a files map (relative name -> bytes), e.g. from a JSONL
// record. Names are untrusted: "..", ".", empty components, absolute paths, NUL and backslashes are
// "bad-name" findings. Always returns a snapshot (Result for symmetry). Thread-safe.
Result<Snapshot> snapshot_from_files(const std::map<std::string, std::string>& files,
                                     const SnapshotLimits& limits,
                                     const ProtectedFiles& protected_files);

// Writes the snapshot's files and every pristine protected file into `dest_dir`, which must not
// exist (its parent must) or be an empty folder owned by this user; it ends with mode 0700. Files
// are created with O_EXCL|O_NOFOLLOW (mode 0600) relative to an opened folder descriptor, so
// nothing can redirect a write. Names are checked again, so a hand-made Snapshot cannot write
// outside `dest_dir`. Findings are not looked at: rejecting is the caller's decision. On failure
// the folder may hold some of the files; the caller removes it. Thread-safe.
Status materialize(const Snapshot& snapshot, const ProtectedFiles& protected_files,
                   const std::string& dest_dir);

}  // namespace cudaagent
