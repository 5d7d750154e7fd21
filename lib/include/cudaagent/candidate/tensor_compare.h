// The trusted comparator: decides whether a candidate's outputs match the reference's, from the
// raw bytes of two TensorTrees (never from Python objects the candidate could have hooked).
// Structure is checked exactly before any value. Values use torch.allclose's form with the absolute
// term scaled by the reference tensor's own magnitude (so an output of values near 1e-4 is not
// swallowed by atol = 0.01), NaN/+Inf/-Inf must sit at the same positions, and a constant output for
// a varying reference fails.
#pragma once

#include <cstdint>
#include <string>

#include "cudaagent/candidate/tensor_file.h"

namespace cudaagent {

// The value rule, per floating tensor (a float scalar is a tensor of one element). With S the mean
// of |e| over the expected tensor's finite elements and eps the spacing of a half-precision dtype
// at 1 (2^-7 bfloat16, 2^-10 float16; 0 for float32 and float64), an element passes when
//   |a - e| <= A + R * |e|,  A = max(atol * min(1, S), 2 * eps * S),  R = max(rtol, eps).
// So atol is an absolute tolerance for outputs of magnitude 1 and above and a tolerance relative to
// the output's scale below it: an honest reordering errs in proportion to the magnitudes it sums,
// which S measures, also for elements that cancel to near zero. For float32 and float64 outputs the
// rule is never looser than torch.allclose with the same atol and rtol. The eps floors are what
// rounding to a half-precision dtype costs at the output's scale (an unfused bfloat16 reference
// rounds after every op): for float16 above S = 5 and bfloat16 above S = 0.64 they exceed atol.
// scale_atol = false gives torch.allclose's rule (A = atol, R = rtol), for ablations.
struct CompareOptions {
  double atol = 1e-2;
  double rtol = 1e-2;
  // Fail an actual tensor that is one constant value (all zeros, all NaN, ...) where the expected
  // tensor is not constant, even when every element is within tolerance.
  bool reject_degenerate = true;
  bool scale_atol = true;
  // Only whether the trees match: the comparison ends at the first element outside tolerance, so
  // the counts and the worst element of a mismatch cover what was read up to it. For a check that
  // expects a mismatch (two input draws give different outputs at nearly every element).
  bool stop_at_first_mismatch = false;
};

// The tolerance of one expected tensor (or float scalar): A and R of the rule above.
struct ElementTolerance {
  double absolute = 0.0;
  double relative = 0.0;
};
ElementTolerance element_tolerance(const TensorTree& expected, const CompareOptions& options);

// Why a comparison failed, so a caller can tell a suspicious output from a merely wrong one.
enum class CompareFailure : std::uint8_t {
  kNone,          // match
  kUncomparable,  // the *expected* tree holds an "other" value: the reference cannot be checked
  kType,          // actual holds an "other" value or a tensor whose python_type differs (subclass)
  kFormat,        // kind, length, dict keys, dtype, shape or device differ
  kDegenerate,    // an actual tensor is constant where the expected one varies
  kValues,        // some element or scalar is outside tolerance or differs exactly
};

struct CompareResult {
  bool match = false;
  CompareFailure failure = CompareFailure::kNone;
  // The first failure in depth-first order, for people; empty on a match. Paths read
  // output, output[1], output["key"]; elements "output[1] at (3, 17)".
  std::string reason;
  // Over element pairs where both values are finite floats (tensors and float scalars):
  // the largest |a - e|, and the largest |a - e| / |e| where e != 0. Zero when nothing was compared
  // or the structure differed.
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;
  // The element with the largest |a - e| - (A + R * |e|): the one nearest to, or furthest
  // past, its tolerance. A NaN/Inf mismatch or an integer/bool difference counts as infinitely
  // far; ties keep the first. Empty when no element was compared.
  std::string worst_path;
  std::uint64_t mismatched_elements = 0;  // elements and scalars outside tolerance, all tensors
  std::uint64_t compared_elements = 0;    // elements and scalars compared (0 if structure differed)
};

// Compares `actual` (the candidate's) against `expected` (the reference's). Dict keys are compared
// as sets; everything else in order. Never reads outside either tree's tensors, even if the trees
// were not produced by read_tensor_file (a tensor whose nbytes disagrees with its shape is a
// kFormat failure). Thread-safe; reads only.
CompareResult compare_outputs(const TensorTree& expected, const TensorTree& actual,
                              const CompareOptions& options = {});

// Whether two trees are identical: same structure and python types, dict keys in the same order,
// tensor bytes equal, float scalars equal bit for bit. For "the inputs were not modified".
bool tensors_bytes_equal(const TensorTree& a, const TensorTree& b);

// Exact conversions of IEEE half and bfloat16 bit patterns (subnormals, infinities, NaN kept).
double float16_to_double(std::uint16_t bits);
double bfloat16_to_double(std::uint16_t bits);

}  // namespace cudaagent
