// The BTF scan that feature probes use instead of libbpf's full parse: the
// same ids as libbpf on the running kernel's BTF and on a BTF built here,
// and nothing (never a crash) from files that are cut, foreign or odd.
#include <bpf/btf.h>
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "files.h"
#include "probe/btf_scan.h"

using flightrec::probe::scan_btf_func_id;

namespace {

void write_file(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), std::streamsize(size));
}

}  // namespace

TEST_CASE("btf scan: the same function ids as libbpf on this kernel's BTF") {
  struct btf* kernel = btf__load_vmlinux_btf();
  REQUIRE(kernel != nullptr);
  for (const char* name : {"bpf_lsm_file_open", "security_file_open", "vfs_read", "do_exit", "schedule"}) {
    CAPTURE(name);
    int want = btf__find_by_name_kind(kernel, name, BTF_KIND_FUNC);
    REQUIRE(want > 0);
    CHECK(scan_btf_func_id(name) == want);
  }
  // Names that are types, not functions, or nothing at all.
  CHECK(scan_btf_func_id("task_struct") == std::nullopt);
  CHECK(scan_btf_func_id("no_such_function_in_any_kernel") == std::nullopt);
  CHECK(scan_btf_func_id("vfs_rea") == std::nullopt);  // a prefix of a name
  CHECK(scan_btf_func_id("") == std::nullopt);
  btf__free(kernel);
}

TEST_CASE("btf scan: a BTF built here, and hostile copies of it") {
  struct btf* b = btf__new_empty();
  REQUIRE(b);
  int i32 = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
  int st = btf__add_struct(b, "thing", 8);
  REQUIRE(btf__add_field(b, "a", i32, 0, 0) == 0);
  REQUIRE(btf__add_field(b, "b", i32, 32, 0) == 0);
  int proto = btf__add_func_proto(b, i32);
  REQUIRE(btf__add_func_param(b, "x", st) == 0);
  int first = btf__add_func(b, "first_func", BTF_FUNC_GLOBAL, proto);
  int second = btf__add_func(b, "second_func", BTF_FUNC_STATIC, proto);
  REQUIRE(second > first);
  uint32_t size = 0;
  const void* raw = btf__raw_data(b, &size);
  REQUIRE(raw);
  std::vector<char> good(static_cast<const char*>(raw), static_cast<const char*>(raw) + size);
  btf__free(b);

  unit::TempDir dir;
  auto path = dir.file("btf");
  write_file(path, good.data(), good.size());
  CHECK(scan_btf_func_id("first_func", path) == first);
  CHECK(scan_btf_func_id("second_func", path) == second);
  CHECK(scan_btf_func_id("thing", path) == std::nullopt);  // a struct

  SUBCASE("cut short anywhere") {
    for (size_t n = 0; n < good.size(); ++n) {
      write_file(path, good.data(), n);
      auto id = scan_btf_func_id("second_func", path);
      CHECK((id == std::nullopt || id == second));
    }
  }
  SUBCASE("not BTF") {
    auto bad = good;
    bad[0] ^= 0xff;
    write_file(path, bad.data(), bad.size());
    CHECK(scan_btf_func_id("first_func", path) == std::nullopt);
  }
  SUBCASE("a kind this reader does not know") {
    auto bad = good;
    // The first type's info word: kind in bits 24-28.
    const auto* hdr = reinterpret_cast<const btf_header*>(bad.data());
    size_t info = hdr->hdr_len + hdr->type_off + 4;
    bad[info + 3] = char(0x1f);
    write_file(path, bad.data(), bad.size());
    CHECK(scan_btf_func_id("first_func", path) == std::nullopt);
  }
  SUBCASE("a huge member count runs off the end") {
    auto bad = good;
    const auto* hdr = reinterpret_cast<const btf_header*>(bad.data());
    // The struct is type 2: after the int's 12 + 4 bytes.
    size_t info = hdr->hdr_len + hdr->type_off + 16 + 4;
    bad[info] = char(0xff);
    bad[info + 1] = char(0xff);
    write_file(path, bad.data(), bad.size());
    CHECK(scan_btf_func_id("second_func", path) == std::nullopt);
  }
  SUBCASE("missing file") { CHECK(scan_btf_func_id("first_func", dir.file("none")) == std::nullopt); }
}
