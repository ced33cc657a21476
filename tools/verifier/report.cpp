// Verifier-complexity report: loads flightrec's BPF objects (the recorder's,
// and the egress allowlist's) as a session would and prints, per program,
// the instructions the verifier processed
// (bpf_prog_info.verified_insns) and the program's size, so growth shows up
// in review. BPF-LSM programs are included only where the kernel loads them.
//   tools/verifier/report (build/tools/verifier/verifier_report)
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstdio>
#include <cstring>

#include "flightrec.skel.h"
#include "flightrec_egress.skel.h"
#include "probe/capture.h"
#include "probe/features.h"

namespace {

void report(bpf_object* obj, unsigned long long& total) {
  bpf_program* prog;
  bpf_object__for_each_program(prog, obj) {
    if (!bpf_program__autoload(prog)) {
      std::printf("%-28s %-34s %14s %10s\n", bpf_program__name(prog), bpf_program__section_name(prog),
                  "not loaded", "-");
      continue;
    }
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) != 0) continue;
    total += info.verified_insns;
    std::printf("%-28s %-34s %14u %10u\n", bpf_program__name(prog), bpf_program__section_name(prog),
                info.verified_insns, info.xlated_prog_len / 8);
  }
}

}  // namespace

int main() {
  flightrec_bpf* skel = flightrec_bpf__open();
  if (!skel) {
    std::perror("open");
    return 1;
  }
  // Settings as a recording session has them, so no branch is cut as dead,
  // and with every enforcement on (path rules, egress allowlist).
  skel->rodata->fr_tls_enabled = 1;
  skel->rodata->fr_hidden_rules = 1;
  skel->rodata->fr_exec_rules = 1;
  skel->rodata->fr_egress_count = 1;
  skel->rodata->fr_egress_lsm = 1;
  bool lsm = flightrec::probe::bpf_lsm_available();
  flightrec::probe::select_programs(skel->obj, lsm, true);
  if (int err = flightrec_bpf__load(skel)) {
    std::fprintf(stderr, "load failed: %s (run as root)\n", std::strerror(-err));
    flightrec_bpf__destroy(skel);
    return 1;
  }
  std::printf("%-28s %-34s %14s %10s\n", "program", "section", "verified insns", "insns");
  unsigned long long total = 0;
  report(skel->obj, total);
  flightrec_egress_bpf* egress = flightrec_egress_bpf__open();
  if (egress) egress->rodata->fr_egress_count = 1;
  if (!egress || flightrec_egress_bpf__load(egress) != 0) {
    std::fprintf(stderr, "the egress object failed to load\n");
    flightrec_egress_bpf__destroy(egress);
    flightrec_bpf__destroy(skel);
    return 1;
  }
  report(egress->obj, total);
  flightrec_egress_bpf__destroy(egress);
  std::printf("%-28s %-34s %14llu\n", "total", "", total);
  flightrec_bpf__destroy(skel);
  return 0;
}
