// Host memory helpers of the CPU backend (Linux): recognising the model's read-only file mapping and
// releasing pages of it this process no longer needs. Internal (the executor's HostBuffer and the
// CPU_REPACK upload use them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace stowage::cpu {

/// True when [a, b) lies inside one readable, non-writable, file-backed mapping of this process
/// (/proc/self/maps: perms "r-", inode != 0), e.g. a range of the GgufFile's mapping. False when
/// /proc/self/maps cannot be read, for anonymous memory (heap, the huge-page copy of mapped
/// weights) and for writable mappings.
bool InsideReadOnlyFileMapping(uintptr_t a, uintptr_t b);

/// Drops this process's pages that lie wholly inside [p, p + n) (the page-aligned interior) when
/// the range is part of a read-only file mapping (InsideReadOnlyFileMapping): madvise(MADV_DONTNEED)
/// unmaps them, the bytes stay readable (a later access faults them in from the page cache / file
/// again) and they leave the resident set. Anything else (heap, anonymous or writable memory, where
/// MADV_DONTNEED would discard data) is left alone. Returns the number of bytes released (0 when
/// none). Never fails: releasing is an optimisation.
size_t ReleaseFileMappedPages(const void* p, size_t n);

}  // namespace stowage::cpu
