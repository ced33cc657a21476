// libbpf relocating flightrec's object against the cut of the kernel's
// BTF (probe/core_btf.h) patches every instruction as it does against the
// whole BTF, on this kernel and in the VM matrix, where the LSM programs
// (and their type relocations) load too.
#include <bpf/libbpf.h>
#include <doctest/doctest.h>

#include <cstdarg>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "probe/core_btf.h"
#include "probe/features.h"
#include "runtime/harness.h"

namespace {

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string>* g_lines;
int keep_relocations(enum libbpf_print_level, const char* fmt, va_list args) {
  char line[512];
  vsnprintf(line, sizeof(line), fmt, args);
  // "prog 'x': relo #3: patched insn #195 (ALU/ALU64) imm 1824 -> 1824", or
  // the poisoning of an insn whose relocation failed: no BTF ids in them.
  std::string s = line;
  if (g_lines && (s.find("patched insn") != std::string::npos || s.find("substituting insn") != std::string::npos))
    g_lines->push_back(s);
  return 0;
}

// libbpf's relocation of every program this kernel loads, as it reports
// each patched instruction.
std::vector<std::string> relocations(const std::vector<uint8_t>& obj, const char* custom_btf) {
  LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = custom_btf);
  struct bpf_object* o = bpf_object__open_mem(obj.data(), obj.size(), &opts);
  REQUIRE(o);
  struct bpf_program* prog;
  bool lsm = flightrec::probe::bpf_lsm_available();
  bpf_object__for_each_program(prog, o) {
    if (!lsm && std::string(bpf_program__section_name(prog)).rfind("lsm/", 0) == 0)
      bpf_program__set_autoload(prog, false);
  }
  std::vector<std::string> lines;
  g_lines = &lines;
  auto old = libbpf_set_print(keep_relocations);
  // A program this kernel refuses (an LSM hook 6.1 lacks) fails the load
  // after every relocation was made and reported: its result is not used.
  bpf_object__load(o);
  libbpf_set_print(old);
  g_lines = nullptr;
  bpf_object__close(o);
  return lines;
}

}  // namespace

TEST_CASE("core btf: every relocation patched as against the whole kernel BTF" * doctest::test_suite("vm-kernel")) {
  std::string why;
  auto obj = slurp(FLIGHTREC_BPF_OBJECT);
  auto kernel = slurp("/sys/kernel/btf/vmlinux");
  auto cut = flightrec::probe::cut_kernel_btf(obj.data(), obj.size(), kernel.data(), kernel.size(), &why);
  REQUIRE_MESSAGE(!cut.empty(), why);
  rt::TempDir dir;
  std::string path = dir.file("cut.btf");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(cut.data()), std::streamsize(cut.size()));

  auto whole = relocations(obj, nullptr);
  auto against_cut = relocations(obj, path.c_str());
  CHECK(whole.size() > 100);
  CHECK(against_cut == whole);
}

