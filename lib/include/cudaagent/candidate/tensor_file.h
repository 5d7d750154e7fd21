// Tensor files: how the trusted reference process and the untrusted candidate process hand the
// outputs of one forward call to the trusted comparator. The reader treats every byte as hostile
// (caps, exact schema, checked arithmetic) and memory-maps the payload so multi-GB outputs are
// compared in place, never copied.
//
// FORMAT "CATENS1" (all integers little-endian):
//   bytes 0..7    magic "CATENS1\n"
//   bytes 8..11   u32 H, the header length in bytes (1 <= H <= 1 MiB)
//   next H bytes  header: one UTF-8 JSON object {"value": V}, nothing else (whitespace allowed)
//   the rest      payload: the tensors' element bytes, back to back
// V describes the returned Python object, recursively (at most 16 levels, 10000 values in all):
//   {"kind":"tensor","dtype":D,"shape":[n0,n1,...],"device":"cpu"|"cuda",
//    "python_type":T,"offset":O,"nbytes":N}
//       D is one of float32 float16 bfloat16 float64 int8 int16 int32 int64 uint8 bool.
//       T is f"{type(t).__module__}.{type(t).__qualname__}", so "torch.Tensor" for a plain tensor
//       and the subclass's own name otherwise. Element bytes are C-contiguous, little-endian, as
//       `t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()` gives them.
//       N == numel * element size; shape entries are integers >= 0 (at most 64 of them).
//       Layout is canonical: tensors' bytes appear in the order the tensors appear in the header
//       (depth first, dict items in header order), with no gaps: the first O is 0, each next O is
//       the previous O + N, and the file ends exactly after the last tensor (no trailing bytes;
//       an extra byte is as much an error as a missing one). No alignment is required.
//   {"kind":"tuple"|"list","items":[V,...]}   exact tuple / exact list
//   {"kind":"dict","items":{"key":V,...}}      exact dict with str keys (no duplicate keys)
//   {"kind":"int","value":I}                   I fits in int64 (bool is written as "bool")
//   {"kind":"float","value":F}                 F a JSON number; for nan/inf/-inf instead
//   {"kind":"float","value":null,"nonfinite":"nan"|"inf"|"-inf"}
//   {"kind":"bool","value":true|false}
//   {"kind":"none"}
//   {"kind":"other","python_type":T}           anything else (namedtuple, str, complex tensor, ...)
// Every listed member is required, no other member is allowed, and JSON duplicate keys are errors.
// The comparator never accepts "other" values, so an unsupported output fails closed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

enum class DType : std::uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kBool
};
std::string_view dtype_name(DType dtype);                     // "float32", as in the file
std::optional<DType> dtype_from_name(std::string_view name);  // nullopt for anything unknown
std::size_t dtype_size(DType dtype);                          // bytes per element
bool dtype_is_floating(DType dtype);

enum class Device : std::uint8_t { kCpu, kCuda };
std::string_view device_name(Device device);  // "cpu", "cuda"

enum class ValueKind : std::uint8_t { kTensor, kTuple, kList, kDict, kInt, kFloat, kBool, kNone, kOther };
std::string_view kind_name(ValueKind kind);  // "tensor", "tuple", ... as in the file

// Untrusted text (dict keys, type names) made safe for a message: JSON-quoted, so quotes and
// control bytes are escaped, and cut after 80 bytes ("..." marks the cut).
std::string quote_for_message(std::string_view untrusted);
// Appends a dict key to a value path the same way: value -> value["logits"].
void append_path_key(std::string& path, std::string_view key);

// One returned Python value. Plain data; copies are cheap because tensor bytes are shared, and a
// tree read from a file keeps the file's mapping alive for as long as any copy of it exists.
struct TensorTree {
  ValueKind kind = ValueKind::kNone;

  // kTensor. `data` points at `nbytes` bytes (may be null when nbytes is 0). `python_type` is
  // also used by kOther.
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  Device device = Device::kCuda;
  std::string python_type;
  std::shared_ptr<const std::byte> data;
  std::uint64_t nbytes = 0;

  // kTuple, kList, kDict. For kDict, keys[i] names items[i] (file order; keys are unique).
  std::vector<TensorTree> items;
  std::vector<std::string> keys;

  // kInt, kFloat, kBool.
  std::int64_t int_value = 0;
  double float_value = 0.0;  // may be NaN or infinite
  bool bool_value = false;

  std::span<const std::byte> bytes() const { return {data.get(), static_cast<std::size_t>(nbytes)}; }
  // Product of the shape; 0 for non-tensors. Valid trees (read or checked) never overflow.
  std::uint64_t numel() const;

  // Builders (for the C++ side and tests). `tensor` takes ownership of `bytes`, which must hold
  // numel * dtype_size bytes; write_tensor_file checks that.
  static TensorTree tensor(DType dtype, std::vector<std::int64_t> shape, std::vector<std::byte> bytes,
                           Device device = Device::kCuda, std::string python_type = "torch.Tensor");
  static TensorTree tuple(std::vector<TensorTree> items);
  static TensorTree list(std::vector<TensorTree> items);
  static TensorTree dict(std::vector<std::pair<std::string, TensorTree>> items);
  static TensorTree integer(std::int64_t value);
  static TensorTree floating(double value);
  static TensorTree boolean(bool value);
  static TensorTree none();
  static TensorTree other(std::string python_type);
};

struct TensorFileLimits {
  std::uint64_t max_file_bytes = std::uint64_t{4} << 30;  // whole file, header included
  std::uint32_t max_header_bytes = std::uint32_t{1} << 20;
  int max_depth = 16;              // the root value is at depth 1
  std::size_t max_values = 10000;  // values of every kind in the whole tree, containers included
};

// Reads and fully validates a tensor file. On success the tree's tensors point into a read-only
// private mapping of the file (released when the last copy of the tree goes away). On failure the
// Status says what is wrong and where: "'out.catens': header: value[1]: nbytes 12, but shape
// [2, 3] float32 needs 24". The file must be a regular file and the final path component must not
// be a symbolic link (earlier components are the caller's to secure). Precondition: nobody
// modifies or truncates the file while the tree is alive -- the writing process tree has exited
// and nothing it left can reach the file -- because a truncated mapping faults (SIGBUS) on access
// and a rewritten one changes under the comparator. Thread-safe for distinct calls.
Result<TensorTree> read_tensor_file(const std::string& path, const TensorFileLimits& limits = {});

// The same from an open descriptor, which stays the caller's (not closed; its offset is unused):
// a memfd or O_TMPFILE the trusted side created and handed to the candidate as its result channel
// needs no path at all, so no symlink or rename in a workspace can redirect the read. `name` is
// only for messages.
Result<TensorTree> read_tensor_fd(int fd, const std::string& name, const TensorFileLimits& limits = {});

// Writes `tree` in the format above (a temporary file in the same directory, mode 0600, then
// rename, so a reader never sees half a file). Fails, writing nothing, when the tree would not
// read back: a tensor whose bytes do not match its shape, depth or size over the default limits,
// duplicate dict keys, an empty python_type. Dict keys that are not UTF-8 are written with U+FFFD
// in place of bad bytes. Thread-safe for distinct paths.
Status write_tensor_file(const std::string& path, const TensorTree& tree);

}  // namespace cudaagent
