// Files the stages write and read: atomic replacement, whole reads, reads of files that an untrusted
// process wrote, private directories and trees removed when they go out of scope.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "cudaagent/base/status.h"

namespace cudaagent {

// Creates `path` and its parents with `mode` if missing. False on failure.
bool make_directories(const std::string& path, unsigned mode = 0700);

// A fresh directory <parent>/<prefix>-XXXXXX (mkdtemp: 0700, unpredictable name); a Status that
// names the parent and the reason when it cannot be made.
Result<std::string> make_private_dir(const std::string& parent, const std::string& prefix);

// A name beside `path` for a file to be renamed onto it: "<path>.tmp.<pid>.<n>", with n counted
// per process, so two threads (or two processes) writing the same path never share a temporary,
// which would let one rename the other's half-written file or find its own already moved.
std::string temporary_sibling(const std::string& path);

// Writes `bytes` to `path` atomically (temporary file in the same directory, then rename).
bool write_file_atomically(const std::string& path, const std::string& bytes);

// The whole file, or nothing when it cannot be read.
bool read_whole_file(const std::string& path, std::string& bytes);

// Reads a file that an untrusted process wrote: it must be a regular file of at most `max_bytes`,
// and its final path component must not be a symbolic link (earlier components are the caller's
// to secure). Never blocks on a FIFO. A Status saying what was wrong otherwise ("'x': is a
// symbolic link", "'x': 5000000 bytes, more than the limit of 1048576").
Status read_untrusted_file(const std::string& path, std::size_t max_bytes, std::string& bytes);

// Makes the tree below `dir` readable (and its folders traversable) by every user: folders 0755,
// files 0644, links left alone and never followed; `dir` itself becomes 0755. For a build handed to
// a process that runs as another, unprivileged user (the candidate's runner). A Status naming the
// first path that could not be changed.
Status open_tree_for_reading(const std::string& dir);

// Removes a directory tree when it goes out of scope, unless asked to keep it (--keep-job-dirs):
// the job directories of verify, filter and profile.
class RemovedTree {
 public:
  RemovedTree(std::string path, bool keep) : path_(std::move(path)), keep_(keep) {}
  ~RemovedTree();
  RemovedTree(const RemovedTree&) = delete;
  RemovedTree& operator=(const RemovedTree&) = delete;

 private:
  std::string path_;
  bool keep_;
};

}  // namespace cudaagent
