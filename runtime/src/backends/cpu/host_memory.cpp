#include "host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace stowage::cpu {

bool InsideReadOnlyFileMapping(uintptr_t a, uintptr_t b) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return false;
  char line[512];
  bool found = false, at_line_start = true;
  while (std::fgets(line, sizeof line, f)) {
    const bool starts = at_line_start;
    at_line_start = std::strchr(line, '\n') != nullptr;  // long paths span several reads
    if (!starts) continue;
    unsigned long lo = 0, hi = 0, off = 0, inode = 0;
    unsigned dmaj = 0, dmin = 0;
    char perms[8] = {0};
    if (std::sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &lo, &hi, perms, &off, &dmaj, &dmin, &inode) != 7)
      continue;
    if (lo <= a && b <= hi) {
      found = perms[0] == 'r' && perms[1] == '-' && inode != 0;
      break;
    }
  }
  std::fclose(f);
  return found;
}

size_t ReleaseFileMappedPages(const void* p, size_t n) {
  const long ps = sysconf(_SC_PAGESIZE);
  const uintptr_t page = ps > 0 ? uintptr_t(ps) : 4096;
  const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (p == nullptr || b <= a || !InsideReadOnlyFileMapping(a, b)) return 0;
  return madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED) == 0 ? size_t(b - a) : 0;
}

}  // namespace stowage::cpu
