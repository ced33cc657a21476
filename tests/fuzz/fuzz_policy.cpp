// Policy files (YAML) and OCI seccomp profiles (JSON) as a user may be
// handed them (policy/policy.h). A policy's extends: names no base here.
#include "common/error.h"
#include "fuzz_input.h"
#include "policy/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  uint8_t which = in.byte();
  std::string text(in.rest);
  try {
    if (which & 1) {
      flightrec::policy::parse_oci_profile(text, "fuzz.json", {"CAP_CHOWN"});
    } else {
      auto no_bases = [](const std::string& name, const std::string&) -> flightrec::policy::PolicyBase {
        throw flightrec::Error("no base " + name + " here");
      };
      flightrec::policy::parse(text, "fuzz.yaml", no_bases);
    }
  } catch (const flightrec::Error&) {
    // refused with a reason: what a bad file must get
  }
  return 0;
}
