#include "probe/egress_filter.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/error.h"
#include "flightrec_egress.skel.h"
#include "probe/capture.h"
#include "probe/core_btf.h"

namespace flightrec::probe {

EgressFilter::EgressFilter(const Options& opts) {
  if (opts.rules.size() > FR_EGRESS_MAX)
    throw Error("at most " + std::to_string(FR_EGRESS_MAX) + " egress allowlist addresses");
  if (opts.cgroup_fd < 0) throw Error("the egress allowlist needs the session's cgroup");
  quiet_libbpf(opts.verbose);
  // Its field accesses are CO-RE relocations (vmlinux.h's types): against
  // a cut of the kernel's BTF, not the whole of it, which libbpf would
  // parse for tens of milliseconds on the run's path (as Capture does).
  size_t object_size = 0;
  const void* object = flightrec_egress_bpf__elf_bytes(&object_size);
  std::string why;
  struct CutFd {  // libbpf reads it at load
    int fd;
    ~CutFd() {
      if (fd >= 0) close(fd);
    }
  } cut{kernel_btf_cut_fd(static_cast<const uint8_t*>(object), object_size, &why)};
  std::string cut_path = cut.fd >= 0 ? "/proc/self/fd/" + std::to_string(cut.fd) : "";
  if (cut.fd >= 0 && access(cut_path.c_str(), R_OK) != 0) {
    close(cut.fd);
    cut.fd = -1;
  }
  LIBBPF_OPTS(bpf_object_open_opts, open_opts, .btf_custom_path = cut.fd >= 0 ? cut_path.c_str() : nullptr);
  skel_ = flightrec_egress_bpf__open_opts(&open_opts);
  if (!skel_) throw Error(errno_message("cannot open the egress allowlist's BPF object", errno));
  try {
    skel_->rodata->fr_egress_count = uint32_t(opts.rules.size());
    skel_->rodata->fr_egress_sni_mode = opts.server_names_fd >= 0 ? opts.sni_mode : uint32_t(FR_SNI_OFF);
    if ((opts.granted_fd >= 0 && bpf_map__reuse_fd(skel_->maps.fr_egress_granted, opts.granted_fd)) ||
        (opts.tickets_fd >= 0 && bpf_map__reuse_fd(skel_->maps.fr_egress_tickets, opts.tickets_fd)) ||
        (opts.named_fd >= 0 && bpf_map__reuse_fd(skel_->maps.fr_egress_named, opts.named_fd)) ||
        (opts.server_names_fd >= 0 && bpf_map__reuse_fd(skel_->maps.fr_egress_names, opts.server_names_fd)))
      throw Error(errno_message("cannot share the runtime grants' and names' maps with the egress allowlist", errno));
    if (int err = flightrec_egress_bpf__load(skel_))
      throw Error(errno_message("the kernel refused the egress allowlist's BPF programs" +
                                    std::string(opts.verbose ? "" : " (run with --verbose for the verifier log)"),
                                -err));
    int rules = bpf_map__fd(skel_->maps.fr_egress);
    for (uint32_t i = 0; i < opts.rules.size(); ++i)
      if (bpf_map_update_elem(rules, &i, &opts.rules[i], BPF_ANY) != 0)
        throw Error(errno_message("cannot load the egress allowlist", errno));
    cuts_ = ring_buffer__new(
        bpf_map__fd(skel_->maps.fr_sni_cuts),
        [](void* self, void* data, size_t size) {
          if (size >= sizeof(fr_sni_cut)) {
            fr_sni_cut cut;
            std::memcpy(&cut, data, sizeof(cut));
            static_cast<EgressFilter*>(self)->taken_.push_back(cut);
          }
          return 0;
        },
        this, nullptr);
    if (!cuts_) throw Error(errno_message("cannot read the egress allowlist's ring of cut connections", errno));
    bpf_program* prog;
    bpf_object__for_each_program(prog, skel_->obj) {
      bpf_link* link = bpf_program__attach_cgroup(prog, opts.cgroup_fd);
      if (!link) throw Error(errno_message("cannot attach the egress allowlist to the session's cgroup", errno));
      links_.push_back(link);
    }
  } catch (...) {
    for (auto* link : links_) bpf_link__destroy(link);
    ring_buffer__free(cuts_);
    flightrec_egress_bpf__destroy(skel_);
    throw;
  }
}

EgressFilter::~EgressFilter() {
  for (auto* link : links_) bpf_link__destroy(link);
  ring_buffer__free(cuts_);
  flightrec_egress_bpf__destroy(skel_);
}

int EgressFilter::cuts_fd() const { return ring_buffer__epoll_fd(cuts_); }

std::vector<fr_sni_cut> EgressFilter::take_cuts() {
  ring_buffer__consume(cuts_);
  return std::exchange(taken_, {});
}

std::vector<NetDrops> EgressFilter::net_drops() const {
  std::vector<NetDrops> out(FR_NET_DROP_KINDS);
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return out;
  std::vector<fr_net_drop> values(static_cast<size_t>(ncpu));
  for (uint32_t kind = 0; kind < FR_NET_DROP_KINDS; ++kind) {
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.fr_net_drops), &kind, values.data()) != 0)
      throw Error(errno_message("cannot read the packet drop counters", errno));
    for (const auto& v : values) {
      out[kind].count += v.count;
      if (v.count) out[kind].last = v;  // one example of a far end
    }
  }
  return out;
}

std::vector<std::string> EgressFilter::attached() const {
  std::vector<std::string> out;
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel_->obj) out.push_back(bpf_program__section_name(prog));
  return out;
}

}  // namespace flightrec::probe
