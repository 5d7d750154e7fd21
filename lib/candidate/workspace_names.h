// Private to the candidate area: the naming and classification rules that workspace.cpp's folder
// walk and files-map form share (see workspace.h for the policy they implement).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/candidate/workspace.h"

namespace cudaagent::workspace_names {

// Escapes control bytes, non-ASCII and backslashes as \xNN and cuts names past 200 bytes.
std::string printable(std::string_view text);

bool is_stem_char(char c);
bool is_name_char(char c);
// Hidden entries (".git", "__pycache__"): skipped, never read, never used.
bool is_hidden(std::string_view component);
// Why a component is refused whatever the entry is (empty, "..", too long, leading '-' or '.', NUL,
// backslash, control byte); empty when fine.
std::string hard_name_problem(std::string_view component, std::size_t max_name_bytes);
// Why a component is refused in a name that is used or could mean code (bytes outside
// [A-Za-z0-9._-]); empty when fine.
std::string strict_name_problem(std::string_view component);
// Both, for names that must be plain whatever they are.
std::string name_problem(std::string_view component, std::size_t max_name_bytes);
std::vector<std::string_view> split_path(std::string_view path);
// The extension, lower case, after trailing spaces and dots are dropped ("k.CU " -> "cu").
std::string lower_extension(std::string_view name);
// model_new.py and kernels/<stem>.{cu,cuh,h,cpp} with stem [A-Za-z0-9_]+.
bool is_candidate_file(std::string_view path);
// Whole-component prefix match ("utils/" a folder, "SKILL.md" one entry).
bool matches_prefix(std::string_view path, bool is_dir, const std::vector<std::string>& prefixes);
// What CUDA Agent's compile script leaves (build/, cuda_extension*.so at the root).
bool is_build_output(std::string_view path, bool is_dir);
// Why a non-candidate file could run code or change the build or imports; empty when it is inert.
std::string unexpected_reason(std::string_view path);

enum class Use { kCandidate, kProtected, kUnexpected, kIgnored };

struct Classified {
  Use use;
  std::string detail;  // for kUnexpected
};

// For an entry that passed the name checks and is not skipped.
Classified classify_file(std::string_view path, const ProtectedFiles& protected_files);

}  // namespace cudaagent::workspace_names
