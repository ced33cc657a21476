// Go programs' TLS functions found through the Go function table: the same
// functions with and without symbols, RETs that are RET instructions, and
// nothing (never a crash) from programs that are cut or whose table lies:
// the programs a session runs are the agent's to choose.
#include <doctest/doctest.h>
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "files.h"
#include "flightrec/abi/events.h"
#include "probe/go_tls.h"

using flightrec::probe::go_tls_functions;
using flightrec::probe::GoTlsFunction;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

std::optional<std::vector<GoTlsFunction>> functions_of(const std::string& path, std::string* why) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto out = go_tls_functions(fd, why);
  close(fd);
  return out;
}

// Where the program's .gopclntab lies in the file.
std::pair<uint64_t, uint64_t> pclntab_of(const std::string& elf) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof(eh));
  auto section = [&](size_t i) {
    Elf64_Shdr s;
    std::memcpy(&s, elf.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof(s));
    return s;
  };
  Elf64_Shdr names = section(eh.e_shstrndx);
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr s = section(i);
    if (std::string(elf.data() + names.sh_offset + s.sh_name) == ".gopclntab") return {s.sh_offset, s.sh_size};
  }
  FAIL("no .gopclntab");
  return {0, 0};
}

// Whatever it found lies inside the file.
void check_bounded(const std::optional<std::vector<GoTlsFunction>>& found, size_t file_size) {
  if (!found) return;
  for (const auto& f : *found) {
    CHECK(f.entry < file_size);
    for (uint64_t r : f.rets) CHECK(r < file_size);
  }
}

}  // namespace

TEST_CASE("go tls: Read, Write and the handshake, with and without symbols; each RET is a RET") {
  for (const char* bin : {GO_TLS_CLIENT_BIN, GO_TLS_CLIENT_STRIPPED_BIN}) {
    CAPTURE(bin);
    std::string why;
    auto found = functions_of(bin, &why);
    REQUIRE(found.has_value());
    REQUIRE(found->size() == 3);
    std::string file = slurp(bin);
    for (const auto& f : *found) {
      CAPTURE(f.name);
      CHECK(f.entry < file.size());
      if (f.func == FR_TLS_HANDSHAKE) {
        CHECK(f.name == "crypto/tls.(*Conn).handshakeContext");
        CHECK(f.rets.empty());
        continue;
      }
      CHECK(f.name == (f.func == FR_TLS_GO_READ ? "crypto/tls.(*Conn).Read" : "crypto/tls.(*Conn).Write"));
      REQUIRE(!f.rets.empty());
      for (uint64_t r : f.rets) {
        CHECK(r > f.entry);
        CHECK(uint8_t(file[r]) == 0xc3);
      }
    }
  }
  // The stripped program's functions are the same code as the other's.
  std::string why;
  auto full = functions_of(GO_TLS_CLIENT_BIN, &why), stripped = functions_of(GO_TLS_CLIENT_STRIPPED_BIN, &why);
  std::string a = slurp(GO_TLS_CLIENT_BIN), b = slurp(GO_TLS_CLIENT_STRIPPED_BIN);
  for (size_t i = 0; i < full->size(); ++i) {
    CHECK((*full)[i].rets.size() == (*stripped)[i].rets.size());
    CHECK(a.substr((*full)[i].entry, 64) == b.substr((*stripped)[i].entry, 64));
  }
}

TEST_CASE("go tls: programs that are not Go, or not x86-64 ELF, are none") {
  std::string why;
  CHECK(!functions_of("/bin/true", &why).has_value());
  CHECK(!functions_of("/etc/passwd", &why).has_value());
  unit::TempDir dir;
  std::string odd = slurp(GO_TLS_CLIENT_STRIPPED_BIN);
  odd[EI_CLASS] = ELFCLASS32;
  write_file(dir.file("class32"), odd);
  CHECK(!functions_of(dir.file("class32"), &why).has_value());
}

TEST_CASE("go tls: a cut program, or a Go table with any byte changed, finds nothing or only what lies in the file") {
  unit::TempDir dir;
  const std::string path = dir.file("p");
  const std::string good = slurp(GO_TLS_CLIENT_STRIPPED_BIN);
  auto [tab, tab_size] = pclntab_of(good);
  std::string why;
  // Cut anywhere from the section headers' end down: never a crash.
  for (size_t cut : {size_t(64), size_t(4096), size_t(tab + 16), size_t(tab + tab_size / 2), good.size() - 1}) {
    CAPTURE(cut);
    write_file(path, good.substr(0, cut));
    check_bounded(functions_of(path, &why), cut);
  }
  // Every byte of the table's header, each set to values that matter
  // (0, 0xff, 0x80) and in turn: the magic, sizes and offsets lie.
  std::string bad = good;
  for (size_t i = 0; i < 72; ++i)
    for (uint8_t v : {uint8_t(0), uint8_t(0xff), uint8_t(0x80)}) {
      bad[tab + i] = char(v);
      write_file(path, bad);
      check_bounded(functions_of(path, &why), bad.size());
      bad[tab + i] = good[tab + i];
    }
  // Random words over the function table and the names (a fixed seed).
  std::mt19937_64 rng(42);
  for (int round = 0; round < 40; ++round) {
    bad = good;
    for (int k = 0; k < 64; ++k) {
      size_t at = tab + 64 + rng() % (tab_size - 72);
      uint32_t v = uint32_t(rng());
      std::memcpy(&bad[at], &v, sizeof(v));
    }
    write_file(path, bad);
    check_bounded(functions_of(path, &why), bad.size());
  }
  // A table from before Go 1.18 is refused with its reason.
  bad = good;
  uint32_t old_magic = 0xfffffffa;
  std::memcpy(&bad[tab], &old_magic, 4);
  write_file(path, bad);
  auto refused = functions_of(path, &why);
  REQUIRE(refused.has_value());
  CHECK(refused->empty());
  CHECK(why.find("before Go 1.18") != std::string::npos);
}

TEST_CASE("go tls: a function made of RETs is refused, not probed at each (kernel memory no cgroup pays for)") {
  std::string why;
  auto real = functions_of(GO_TLS_CLIENT_BIN, &why);
  REQUIRE(real.has_value());
  std::string file = slurp(GO_TLS_CLIENT_BIN);
  size_t most = 0;
  for (const auto& f : *real) {
    most = std::max(most, f.rets.size());
    if (f.func != FR_TLS_GO_READ) continue;
    // Its body, from the entry to its last RET, all RET bytes: a sea of them.
    uint64_t last = *std::max_element(f.rets.begin(), f.rets.end());
    REQUIRE(last - f.entry + 1 > flightrec::probe::kGoRetsMax);
    std::fill(file.begin() + long(f.entry), file.begin() + long(last) + 1, char(0xc3));
  }
  MESSAGE("the real crypto/tls functions have " << most << " RETs at most");
  CHECK(most <= flightrec::probe::kGoRetsMax / 4);  // far below the bound: real programs are never refused
  unit::TempDir dir;
  write_file(dir.file("fake"), file);
  std::string fake_why;
  auto found = functions_of(dir.file("fake"), &fake_why);
  REQUIRE(found.has_value());
  CHECK(found->empty());
  CHECK(fake_why.find("crypto/tls.(*Conn).Read has more than 64 RET instructions") != std::string::npos);
}
