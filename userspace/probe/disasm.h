#pragma once
// capstone, loaded the first time a program's code must be read (a Go
// program's RETs, a static TLS library's functions): its tables are ~3 MB
// of data relocated at load, which every flightrec process (the daemon,
// each run) would carry otherwise, whatever it probes.
#include <capstone/capstone.h>

#include <string>

namespace flightrec::probe {

struct Capstone {
  decltype(&cs_open) open;
  decltype(&cs_option) option;
  decltype(&cs_malloc) malloc;
  decltype(&cs_disasm_iter) disasm_iter;
  decltype(&cs_free) free;
  decltype(&cs_close) close;
};

// nullptr when the library cannot be loaded, and why in *why.
const Capstone* capstone(std::string* why);

}  // namespace flightrec::probe
