// How a stage's run ended when it did not fail (kept apart from cli.h so that code which only
// ends runs does not pull in CLI11).
#pragma once

namespace cudaagent {

enum class StageEnd {
  kCompleted,   // every input record was handled (or a stop request ended the run: the exit code
                // then comes from the signal): exit 0
  kPipeClosed,  // the reader downstream went away: quiet exit 128+SIGPIPE
};

}  // namespace cudaagent
