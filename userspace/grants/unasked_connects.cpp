#include "grants/unasked_connects.h"

#include <bpf/bpf.h>

#include <cstring>

#include "common/system.h"
#include "flightrec/abi/events.h"

namespace flightrec::grants {

bool named_admits(int map, int family, const uint8_t* addr, uint16_t port) {
  if (map < 0) return false;
  fr_egress_endpoint key{};
  std::memcpy(key.addr, addr, sizeof(key.addr));
  key.family = uint32_t(family);
  uint64_t until = 0;
  for (uint16_t p : {port, uint16_t(0)}) {
    if (p == 0 && (port == 53 || port == 853)) break;  // as fr_egress_named_ok: never another resolver's
    key.port = p;
    if (bpf_map_lookup_elem(map, &key, &until) == 0 && mono_ns() < until) return true;
  }
  return false;
}

}  // namespace flightrec::grants
