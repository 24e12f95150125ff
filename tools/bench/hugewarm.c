/* Puts model files into the page cache as huge (PMD-sized) folios, so that every runtime mapping
 * them reads through 2 MiB pages: drops the file's clean, unmapped cached pages
 * (POSIX_FADV_DONTNEED), then faults it in through a 2 MiB-aligned read-only mapping with
 * MADV_HUGEPAGE (the kernel's mmap readahead then allocates PMD-order folios on filesystems with
 * large-folio support, e.g. ext4/xfs on Linux >= 6.x). Whether a model's cached pages are huge
 * otherwise depends on how they got into the cache (written by the quantizer, read by another
 * tool), and tg speed of both runtimes in the benchmark follows it; this makes the state the same
 * for every file and run. Prints, per file, the share of it mapped by PMDs (FilePmdMapped).
 * Usage: hugewarm FILE...   Built by scripts/bench-vs-llamacpp.sh. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static long pmd_mapped_kib(uintptr_t lo, uintptr_t hi) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  long kib = 0;
  int in = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx ", &a, &b) == 2) { /* a mapping header: "lo-hi perms ..." */
      in = a >= lo && b <= hi;
      continue;
    }
    long v;
    if (in && sscanf(line, "FilePmdMapped: %ld kB", &v) == 1) kib += v;
  }
  fclose(f);
  return kib;
}

int main(int argc, char** argv) {
  const size_t kHuge = 2u << 20;
  int rc = 0;
  for (int i = 1; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
      fprintf(stderr, "hugewarm: %s: cannot open or empty\n", argv[i]);
      rc = 1;
      if (fd >= 0) close(fd);
      continue;
    }
    size_t n = (size_t)st.st_size;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    char* r = mmap(NULL, n + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) {
      perror("hugewarm: mmap");
      return 1;
    }
    char* a = (char*)(((uintptr_t)r + kHuge - 1) & ~(uintptr_t)(kHuge - 1));
    char* p = mmap(a, n, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
      perror("hugewarm: mmap file");
      return 1;
    }
    madvise(p, n, MADV_HUGEPAGE);
    volatile unsigned char sink = 0;
    for (size_t off = 0; off < n; off += 4096) sink ^= (unsigned char)p[off];
    long kib = pmd_mapped_kib((uintptr_t)p, (uintptr_t)p + n + 4096);
    printf("%s: %.0f%% of %.0f MiB in huge pages\n", argv[i], kib < 0 ? 0.0 : 100.0 * kib * 1024 / n,
           n / 1048576.0);
    munmap(r, n + kHuge);
    close(fd);
  }
  return rc;
}
