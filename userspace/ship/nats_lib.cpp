#include "ship/nats_lib.h"

#include <dlfcn.h>

#include "common/error.h"

namespace flightrec::ship {

std::string NatsLib::error(natsStatus s) const {
  natsStatus last = NATS_OK;
  const char* text = nats_GetLastError(&last);
  if (text && *text) return text;
  return natsStatus_GetText(s);
}

const NatsLib& nats_lib() {
  static std::string failure;
  static const NatsLib* loaded = []() -> const NatsLib* {
    void* lib = dlopen(FLIGHTREC_NATS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      failure = std::string("NATS needs libnats (Debian: libnats3.4): ") + (e ? e : FLIGHTREC_NATS_LIBRARY);
      return nullptr;
    }
    static NatsLib n;
#define FLIGHTREC_NATS_LOAD(f)                                                          \
  n.f = reinterpret_cast<decltype(&::f)>(dlsym(lib, #f));                               \
  if (!n.f) {                                                                           \
    failure = std::string(FLIGHTREC_NATS_LIBRARY) + " lacks " #f " (a libnats too old)"; \
    return nullptr;                                                                     \
  }
    FLIGHTREC_NATS_FUNCTIONS(FLIGHTREC_NATS_LOAD)
#undef FLIGHTREC_NATS_LOAD
    return &n;
  }();
  if (!loaded) throw Error(failure);
  return *loaded;
}

}  // namespace flightrec::ship
