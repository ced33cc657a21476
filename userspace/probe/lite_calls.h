#pragma once
// The syscalls lite sessions see, each at its own syscalls:sys_exit_NAME
// tracepoint, and what becomes of each (enum fr_lite_kind). docs/LITE.md
// lists them with what lite does not see.
#include <cstdint>
#include <vector>

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::probe {

struct LiteCall {
  uint32_t nr;              // x86-64
  const char* tracepoint;   // syscalls:sys_exit_<this>: the kernel's name, not always the call's
  fr_lite_kind kind;
};

const std::vector<LiteCall>& lite_calls();

}  // namespace flightrec::probe
