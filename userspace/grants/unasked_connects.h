#pragma once
// The connects the grant supervisor lets go on without asking (ask.connect),
// judged as the cgroup programs judge them: to the allowlist's addresses
// (policy::endpoint_allowed), and to the addresses an allowed name's answer
// admitted, while it does.
#include <cstdint>
#include <vector>

#include "policy/policy.h"

namespace flightrec::grants {

// Admitted now in fr_egress_named (map; -1: none) for that port or any (fr_egress_named_ok).
bool named_admits(int map, int family, const uint8_t* addr, uint16_t port);

}  // namespace flightrec::grants
