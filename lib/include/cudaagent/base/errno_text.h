// The system's words for an errno value ("No such file or directory"), for error messages.
#pragma once

#include <string>
#include <system_error>

namespace cudaagent {

inline std::string errno_text(int error) { return std::system_category().message(error); }

}  // namespace cudaagent
