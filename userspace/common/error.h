#pragma once
// Errors, in one style across flightrec:
// - Error is a failure a user can act on. Its message is one sentence that
//   says what failed and why (errno_message for a system call's), printed
//   as is by the CLI. It is thrown where the work cannot go on, and caught
//   at a command's top, or by a caller that can go on without that piece.
// - A failure the work goes on past (a probe that cannot attach, a file
//   gone meanwhile) is returned (bool, optional, -errno), not thrown, and
//   said where a reader looks: an `error` entry in the record, or stderr.
// - A catch that drops what it caught has a comment saying why that is
//   safe (nothing is lost, or what is lost is said elsewhere).
// - A thread or a forked helper catches at its top: an exception that
//   escaped one would end the whole process (std::terminate).
#include <stdexcept>
#include <string>

namespace flightrec {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "what: strerror(errno)"
std::string errno_message(const std::string& what, int err);

}  // namespace flightrec
