// Safetensors checkpoints, read and written without torch: an 8-byte little-endian header length,
// a JSON header naming each tensor's dtype, shape and byte range, then the raw data. Files are
// memory-mapped, so opening a checkpoint reads only its headers and a tensor's bytes are paged in
// when they are copied out. A directory holds either model.safetensors or Hugging Face's sharded
// form (model-0000i-of-0000n.safetensors and model.safetensors.index.json); we write the same
// form back, with the same tensor names, so an inference server loads our checkpoints unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent::train {

enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

std::string_view dtype_name(DType dtype);  // "F32", "BF16", ... as safetensors spells them
std::size_t dtype_size(DType dtype);       // bytes per element
std::optional<DType> parse_dtype(std::string_view name);

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range within the file's data section
  std::int64_t numel() const;
};

// One tensor's description and its bytes (valid while the Checkpoint lives).
struct TensorView {
  const TensorInfo* info = nullptr;
  std::span<const std::byte> bytes;
};

// A checkpoint directory (or one .safetensors file), its files mapped read-only. Thread-safe for
// reading.
class Checkpoint {
 public:
  // Opens `path`: a .safetensors file, or a directory with model.safetensors.index.json (every
  // shard it names) or, without one, model.safetensors. A Status names the file and what is wrong
  // (a header that is not JSON, an offset beyond the file, a size that does not match the shape,
  // a name in two shards).
  static Result<Checkpoint> open(const std::string& path);
  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  std::optional<TensorView> find(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  // The files opened, in order (for messages and fingerprints).
  const std::vector<std::string>& files() const;

 private:
  struct Impl;
  explicit Checkpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A tensor to write: its bytes come from `fill`, which writes exactly numel * dtype_size bytes to
// the buffer it is given (so a caller can stream tensors from a device one at a time).
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::function<void(std::byte* destination)> fill;
  std::uint64_t byte_size() const;
};

// Writes one safetensors file atomically (a temporary file renamed into place), tensors in the
// order given, header padded to 8 bytes, `metadata` as the "__metadata__" entry.
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::vector<std::pair<std::string, std::string>>& metadata);

// Writes the weights of a checkpoint into `dir` (which must exist): model.safetensors when they
// fit in `max_shard_bytes`, else shards of at most that size (a tensor larger than it gets a shard
// of its own) named model-0000i-of-0000n.safetensors plus model.safetensors.index.json. Tensors are
// written sorted by name.
Status write_checkpoint_weights(const std::string& dir, std::vector<TensorToWrite> tensors,
                                std::uint64_t max_shard_bytes);

}  // namespace cudaagent::train
