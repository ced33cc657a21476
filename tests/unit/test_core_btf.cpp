// The cut of the kernel's BTF that libbpf relocates against: the relocated
// types whole in it, and nothing (never a crash) from inputs that are cut
// short or odd. That libbpf patches every relocation as against the whole
// BTF is tested where programs load: tests/runtime/test_core_btf.cpp.
#include <bpf/btf.h>
#include <doctest/doctest.h>
#include <elf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "files.h"
#include "probe/core_btf.h"

using flightrec::probe::cut_kernel_btf;

namespace {

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> object() { return slurp(FLIGHTREC_BPF_OBJECT); }
std::vector<uint8_t> kernel_btf() { return slurp("/sys/kernel/btf/vmlinux"); }

std::vector<uint8_t> cut_of(const std::vector<uint8_t>& obj, const std::vector<uint8_t>& kernel, std::string* why) {
  return cut_kernel_btf(obj.data(), obj.size(), kernel.data(), kernel.size(), why);
}

// Offset of a section's bytes in an ELF64 object (the test's own reader).
size_t section_offset(const std::vector<uint8_t>& elf, const char* name) {
  Elf64_Ehdr eh;
  memcpy(&eh, elf.data(), sizeof(eh));
  Elf64_Shdr names;
  memcpy(&names, elf.data() + eh.e_shoff + eh.e_shstrndx * sizeof(Elf64_Shdr), sizeof(names));
  for (int i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    memcpy(&sh, elf.data() + eh.e_shoff + i * sizeof(sh), sizeof(sh));
    if (strcmp(reinterpret_cast<const char*>(elf.data() + names.sh_offset + sh.sh_name), name) == 0)
      return sh.sh_offset;
  }
  return 0;
}

}  // namespace

TEST_CASE("core btf: the relocated types are whole in the cut, and the cut is small") {
  std::string why;
  auto kernel_raw = kernel_btf();
  auto cut_raw = cut_of(object(), kernel_raw, &why);
  REQUIRE_MESSAGE(!cut_raw.empty(), why);
  struct btf* kernel = btf__new(kernel_raw.data(), uint32_t(kernel_raw.size()));
  struct btf* cut = btf__new(cut_raw.data(), uint32_t(cut_raw.size()));
  REQUIRE(kernel);
  REQUIRE(cut);
  CHECK(btf__type_cnt(cut) * 20 < btf__type_cnt(kernel));

  // Every reference in the cut stays inside it.
  for (uint32_t id = 1; id < btf__type_cnt(cut); ++id) {
    const btf_type* t = btf__type_by_id(cut, id);
    if (btf_is_composite(t))
      for (int i = 0; i < btf_vlen(t); ++i) CHECK(btf_members(t)[i].type < btf__type_cnt(cut));
    if (btf_is_ptr(t) || btf_is_typedef(t) || btf_is_mod(t)) CHECK(t->type < btf__type_cnt(cut));
  }
  // Types the programs read, with every member where the kernel has it.
  for (const char* name : {"task_struct", "file", "dentry", "sock", "cgroup", "linux_binprm", "mm_struct"}) {
    CAPTURE(name);
    int k = btf__find_by_name_kind(kernel, name, BTF_KIND_STRUCT);
    int c = btf__find_by_name_kind(cut, name, BTF_KIND_STRUCT);
    REQUIRE(k > 0);
    REQUIRE(c > 0);
    const btf_type* kt = btf__type_by_id(kernel, k);
    const btf_type* ct = btf__type_by_id(cut, c);
    CHECK(btf_vlen(ct) == btf_vlen(kt));
    CHECK(btf__resolve_size(cut, c) == btf__resolve_size(kernel, k));
    for (int i = 0; i < btf_vlen(kt) && i < btf_vlen(ct); ++i) {
      CHECK(std::string(btf__name_by_offset(cut, btf_members(ct)[i].name_off)) ==
            btf__name_by_offset(kernel, btf_members(kt)[i].name_off));
      CHECK(btf_members(ct)[i].offset == btf_members(kt)[i].offset);
    }
  }
  btf__free(cut);
  btf__free(kernel);
}

TEST_CASE("core btf: an object at an odd address is cut as an aligned one") {
  auto obj = object();
  auto kernel = kernel_btf();
  std::vector<uint8_t> shifted(obj.size() + 1);
  memcpy(shifted.data() + 1, obj.data(), obj.size());
  std::string why;
  auto aligned = cut_of(obj, kernel, &why);
  REQUIRE(!aligned.empty());
  CHECK(cut_kernel_btf(shifted.data() + 1, obj.size(), kernel.data(), kernel.size(), &why) == aligned);
}

TEST_CASE("core btf: a relocated type the kernel's BTF lacks is reported (the modules' BTF may hold it)") {
  auto obj = object();
  auto kernel = kernel_btf();
  std::vector<std::string> missing;
  std::string why;
  REQUIRE(!cut_kernel_btf(obj.data(), obj.size(), kernel.data(), kernel.size(), &why, &missing).empty());
  CHECK(missing.empty());
  // unix_sock renamed in a copy of the kernel's string section.
  std::string needle("\0unix_sock\0", 11);
  auto at = std::search(kernel.begin(), kernel.end(), needle.begin(), needle.end());
  REQUIRE(at != kernel.end());
  at[5] = 'X';
  auto cut = cut_kernel_btf(obj.data(), obj.size(), kernel.data(), kernel.size(), &why, &missing);
  CHECK(!cut.empty());
  CHECK(missing == std::vector<std::string>{"unix_sock"});
}

TEST_CASE("core btf: an object that asks for kernel type ids is not cut for") {
  auto obj = object();
  size_t ext = section_offset(obj, ".BTF.ext");
  REQUIRE(ext > 0);
  uint32_t hdr_len, relo_off, rec_size;
  memcpy(&hdr_len, &obj[ext + 4], 4);
  memcpy(&relo_off, &obj[ext + 24], 4);
  size_t relos = ext + hdr_len + relo_off;
  memcpy(&rec_size, &obj[relos], 4);
  // The first record of the first section: its kind becomes TYPE_ID_TARGET.
  uint32_t kind = 7;
  memcpy(&obj[relos + 4 + 8 + 12], &kind, 4);
  std::string why;
  CHECK(cut_of(obj, kernel_btf(), &why).empty());
  CHECK(why.find("kernel type ids") != std::string::npos);
}

TEST_CASE("core btf: inputs cut short or scrambled give no cut and a reason, never a crash") {
  auto obj = object();
  auto kernel = kernel_btf();
  std::mt19937 rng(7);
  std::string why;
  for (int i = 0; i < 60; ++i) {
    std::vector<uint8_t> part(kernel.begin(), kernel.begin() + long(rng() % kernel.size()));
    why.clear();
    if (cut_of(obj, part, &why).empty()) CHECK(!why.empty());
  }
  for (int i = 0; i < 40; ++i) {
    std::vector<uint8_t> part(obj.begin(), obj.begin() + long(rng() % obj.size()));
    why.clear();
    if (cut_of(part, kernel, &why).empty()) CHECK(!why.empty());
  }
  // Random words over the kernel's types and the object's BTF sections.
  for (int i = 0; i < 40; ++i) {
    auto k = kernel;
    auto o = obj;
    for (int j = 0; j < 64; ++j) {
      uint32_t word = rng();
      memcpy(&k[24 + rng() % (k.size() / 4)], &word, 4);
      size_t at = section_offset(o, j % 2 ? ".BTF" : ".BTF.ext") + rng() % 4096;
      if (at + 4 <= o.size()) memcpy(&o[at], &word, 4);
    }
    why.clear();
    if (cut_of(o, k, &why).empty()) CHECK(!why.empty());
  }
  CHECK(cut_of({}, kernel, &why).empty());
  CHECK(cut_of(obj, {}, &why).empty());
}
