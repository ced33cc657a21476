#pragma once
// What a policy's text gives: its PolicyError's message, or "" when it parses.
#include <string>

#include "policy/policy.h"

namespace policy_test {

inline std::string error_of(const std::string& yaml) {
  try {
    flightrec::policy::parse(yaml, "t.yaml");
  } catch (const flightrec::policy::PolicyError& e) {
    return e.what();
  }
  return "";
}

}  // namespace policy_test
