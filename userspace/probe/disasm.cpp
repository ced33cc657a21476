#include "probe/disasm.h"

#include <dlfcn.h>

namespace flightrec::probe {

const Capstone* capstone(std::string* why) {
  static std::string error;
  static const Capstone* loaded = []() -> const Capstone* {
    void* lib = dlopen(FLIGHTREC_CAPSTONE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    static Capstone c{};
    if (lib) {
      c.open = reinterpret_cast<decltype(&cs_open)>(dlsym(lib, "cs_open"));
      c.option = reinterpret_cast<decltype(&cs_option)>(dlsym(lib, "cs_option"));
      c.malloc = reinterpret_cast<decltype(&cs_malloc)>(dlsym(lib, "cs_malloc"));
      c.disasm_iter = reinterpret_cast<decltype(&cs_disasm_iter)>(dlsym(lib, "cs_disasm_iter"));
      c.free = reinterpret_cast<decltype(&cs_free)>(dlsym(lib, "cs_free"));
      c.close = reinterpret_cast<decltype(&cs_close)>(dlsym(lib, "cs_close"));
      if (c.open && c.option && c.malloc && c.disasm_iter && c.free && c.close) return &c;
    }
    const char* e = dlerror();
    error = std::string("the disassembler cannot be loaded: ") + (e ? e : FLIGHTREC_CAPSTONE_LIBRARY);
    return nullptr;
  }();
  if (!loaded) *why = error;
  return loaded;
}

}  // namespace flightrec::probe
