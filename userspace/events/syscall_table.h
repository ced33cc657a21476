#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::events {

struct SyscallInfo {
  const char* name = nullptr;               // nullptr: not a known syscall
  const char* str_name[2] = {nullptr, nullptr};  // field names of string args
  fr_syscall_spec spec{};                   // what the BPF side reads
};

// nullptr when nr is outside the table.
const SyscallInfo* syscall_info(uint32_t nr);
std::optional<uint32_t> syscall_number(std::string_view name);

}  // namespace flightrec::events
