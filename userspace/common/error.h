#pragma once
// Errors a user can act on: the message is one sentence, printed as is by
// the CLI. Thrown where the work cannot go on; caught only at the top.
#include <stdexcept>
#include <string>

namespace flightrec {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "what: strerror(errno)"
std::string errno_message(const std::string& what, int err);

}  // namespace flightrec
