// The consumer's memory as the RNIC touches it: a registration proves the range is mapped with
// the access it grants, and every copy to or from registered memory survives the range being
// unmapped or protected afterwards (docs/security.md, "Registered memory").
#pragma once

#include <cstddef>
#include <cstdint>

#include "softrnic/rnic.hpp"

namespace softrnic {

// Whether [addr, addr+len) is mapped in this process, readable, and writable when `write`:
// ok; invalid_param when part of it is not mapped; protection_violation when it is mapped
// without the access (PROT_NONE, or read-only and `write`). Reads /proc/self/maps.
Status check_mapping(std::uintptr_t addr, std::uint64_t len, bool write);

// Runs fn(arg) and returns true; false when it faulted (SIGSEGV or SIGBUS) on the way: the
// consumer unmapped or protected memory it had registered. fn must touch nothing but that memory
// and its own locals (no locks, no allocation): it is abandoned at the fault with siglongjmp.
// Faults outside such a call go to the handler that was installed before (or the default).
bool run_guarded(void (*fn)(void*), void* arg);

// memcpy through run_guarded.
bool guarded_copy(void* dst, const void* src, std::size_t n);

}  // namespace softrnic
