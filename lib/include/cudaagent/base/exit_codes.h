// The exit codes every cudaagent program uses (cudaagent(7), EXIT STATUS).
#pragma once

namespace cudaagent {

enum ExitCode : int {
  kExitOk = 0,        // the whole input was processed; per-record failures are in the output
  kExitFailure = 1,   // the stage could not do its job (store, write error, GPU, too many bad lines)
  kExitUsage = 2,     // usage error, nothing done
  kExitSignalBase = 128,  // killed by signal N after flushing every complete record: 128 + N
};

}  // namespace cudaagent
