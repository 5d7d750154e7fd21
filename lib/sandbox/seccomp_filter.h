// Private to the sandbox: the seccomp program bwrap loads before it execs the command. Key design
// choice: a deny-list over a default of "allow" — CUDA, Python and torch use a long, driver-
// dependent tail of system calls that an allow-list would break — compiled by libseccomp, which
// also handles the architecture checks that hand-written BPF gets wrong.
#pragma once

#include "cudaagent/base/status.h"

namespace cudaagent::sandbox_detail {

// Builds the program (the rules are listed at sandbox_command in sandbox.h) and returns a sealed,
// close-on-exec memfd holding it as raw BPF, offset 0; the caller owns the descriptor. With
// deny_inet, socket(AF_INET/AF_INET6) fails with EPERM. Fails when cudaagent was built without
// libseccomp, on an architecture the rules were not written for, or when libseccomp refuses.
Result<int> seccomp_program_fd(bool deny_inet);

}  // namespace cudaagent::sandbox_detail
