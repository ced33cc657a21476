#pragma once
// Backpressure's emergency brake, userspace half (FR_SESSION_BRAKE in
// flightrec/abi/events.h): the kernel stops a process of a braked session
// that makes a record while its ring is over three quarters full, and
// notes it in fr_braked; these continue them once the ring has drained.
#include <cstddef>

namespace flightrec::probe {

// Continues every process noted in fr_braked (the map at braked_map_fd)
// that is still the process the kernel stopped (same start time), and
// forgets the notes. Returns how many were continued.
size_t continue_braked(int braked_map_fd);

}  // namespace flightrec::probe
