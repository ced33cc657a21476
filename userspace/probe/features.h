#pragma once
// What this kernel really lets us do, found by trying: each probe loads
// (and where it matters attaches) a tiny program or creates a map.
#include <string>
#include <vector>

namespace flightrec::probe {

struct Feature {
  std::string name;
  bool available = false;
  bool required = false;   // flightrec cannot record without it
  std::string detail;      // why not, or where
};

std::vector<Feature> probe_features();

// Whether BPF-LSM programs load and attach here (a tiny one is tried,
// once per process).
bool bpf_lsm_available();

// Whether this kernel makes uprobe_multi links (Linux 6.6+; tried once
// per process).
bool uprobe_multi_available();

// Throws Error with one clear sentence if something recording needs is
// missing: not root, no BTF, no cgroup v2, tp_btf refused.
void require_recording_features();

}  // namespace flightrec::probe
