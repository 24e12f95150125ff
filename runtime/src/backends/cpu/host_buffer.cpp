// HostBuffer (backend.h): host memory of every backend that computes on the host or stages
// through it: anonymous mappings for planned buffers, wrapped ranges of the model file mapping.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "backend.h"
#include "host_memory.h"

namespace stowage::exec {

namespace {

constexpr uint64_t kHugePage = uint64_t(2) << 20;

uint64_t PageSize() {
  const long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<uint64_t>(p) : 4096;
}

// The mapped length of a buffer of `size` bytes: whole pages, at least one.
uint64_t MappedLength(uint64_t size, uint64_t page) {
  return (std::max<uint64_t>(size, 1) + page - 1) / page * page;
}

// Memory the kernel reports as available (MemAvailable of /proc/meminfo), 0 when unknown.
uint64_t AvailableBytes() {
  FILE* f = std::fopen("/proc/meminfo", "re");
  if (!f) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  std::fclose(f);
  return uint64_t(kib) * 1024;
}

// False when transparent huge pages are off ("[never]" in /sys/kernel/mm/transparent_hugepage/
// enabled): a copy of mapped weights would then gain nothing.
bool TransparentHugePagesUsable() {
  FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
  if (!f) return false;
  char line[128] = {0};
  const bool read = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  return read && std::strstr(line, "[never]") == nullptr;
}

// Maps `len` bytes of zeroed anonymous memory at a multiple of `align` (a power of two >= the page
// size), or returns nullptr. Exactly [result, result + len) stays mapped.
uint8_t* MapAnonymous(uint64_t len, uint64_t align, uint64_t page) {
  const uint64_t span = len + align - page;
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const uintptr_t raw = reinterpret_cast<uintptr_t>(m);
  const uintptr_t base = (raw + align - 1) / align * align;
  if (base > raw) munmap(m, base - raw);
  const uintptr_t end = raw + span;
  if (end > base + len) munmap(reinterpret_cast<void*>(base + len), end - (base + len));
  if (len >= kHugePage) (void)madvise(reinterpret_cast<void*>(base), len, MADV_HUGEPAGE);  // a hint
  return reinterpret_cast<uint8_t*>(base);
}

// Weights mapped from the file sit in the page cache in 4 KiB pages, and token generation streams
// them once per token: the TLB misses cost a lot (0.85B Q4_K_M, 1 thread: 31 ms of CPU per token
// from the file mapping, 18 ms from a copy in huge pages). This replaces the 2 MiB-aligned interior
// of [data, data + size) — when it lies in a read-only file mapping and takes at most half the
// available memory — by an anonymous, read-only copy in transparent huge pages, at the same
// addresses (mremap over the file pages). Readers see the same bytes; the owner's munmap of the file
// mapping unmaps the copy too. The file pages leave this process's resident set (they stay in the
// page cache), so resident memory does not grow. Nothing is copied when THP is off. On any failure
// the rest of the file mapping stays as it was (chunks already moved hold the same bytes).
void MoveToAnonymousHugePages(const uint8_t* data, uint64_t size) {
  const uintptr_t a = (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) / kHugePage * kHugePage;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(data) + size) / kHugePage * kHugePage;
  if (b <= a) return;
  const uint64_t len = b - a;
  const uint64_t avail = AvailableBytes();
  if (avail == 0 || len > avail / 2 || !TransparentHugePagesUsable() || !cpu::InsideReadOnlyFileMapping(a, b))
    return;
  // 32 MiB at a time, so the peak resident set grows by one chunk, not by the whole range.
  constexpr uint64_t kChunk = uint64_t(32) << 20;
  for (uint64_t off = 0; off < len; off += kChunk) {
    const uint64_t n = std::min(kChunk, len - off);
    void* const at = reinterpret_cast<void*>(a + off);
    uint8_t* copy = MapAnonymous(n, kHugePage, PageSize());
    if (copy == nullptr) return;
    std::memcpy(copy, at, n);
    void* moved = MAP_FAILED;
    if (mprotect(copy, n, PROT_READ) == 0) moved = mremap(copy, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, at);
    if (moved == MAP_FAILED) {
      munmap(copy, n);
      return;
    }
  }
}

}  // namespace

// Anonymous private mapping instead of aligned_alloc + memset: the kernel hands out zeroed pages on
// first touch, so buffers the plan sizes for the worst case (the 250 MiB output buffer of
// n_batch x n_vocab logits, the compute buffer of a full ubatch) occupy memory only where they are
// written (llama.cpp likewise grows its output buffer on demand). Buffers of 2 MiB and more start on
// a 2 MiB boundary and are madvise(MADV_HUGEPAGE)d: transparent huge pages (THP "madvise" mode)
// cut TLB misses when the weights stream through once per token (the issue measured 31.5 -> 34.5
// GB/s read bandwidth with huge pages on the 2-core dev machine).
Result<std::unique_ptr<HostBuffer>> HostBuffer::Allocate(uint64_t size, uint64_t alignment) {
  const uint64_t page = PageSize();
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > (uint64_t(1) << 30))
    return InvalidArgument("host buffer alignment " + std::to_string(alignment) +
                           " is not a power of two in [1, 2^30]");
  if (size > (uint64_t(1) << 56))
    return ResourceExhausted("cannot allocate " + std::to_string(size) +
                             " bytes of host memory (more than 2^56)");
  const uint64_t len = MappedLength(size, page);
  uint64_t align = std::max(alignment, page);
  if (len >= kHugePage) align = std::max(align, kHugePage);
  // The destructor unmaps MappedLength(size) bytes at base.
  uint8_t* const mem = MapAnonymous(len, align, page);
  if (mem == nullptr)
    return ResourceExhausted("cannot allocate " + std::to_string(size) +
                             " bytes of host memory: " + std::strerror(errno));
  const uintptr_t base = reinterpret_cast<uintptr_t>(mem);
  std::unique_ptr<HostBuffer> b(new (std::nothrow) HostBuffer());
  if (!b) {
    munmap(reinterpret_cast<void*>(base), len);
    return ResourceExhausted("cannot allocate a host buffer object");
  }
  b->data_ = reinterpret_cast<uint8_t*>(base);
  b->size_ = size;
  b->owned_ = true;
  return b;
}

std::unique_ptr<HostBuffer> HostBuffer::Wrap(const uint8_t* data, uint64_t size, bool copy_to_huge_pages) {
  if (copy_to_huge_pages) {
    MoveToAnonymousHugePages(data, size);
  } else {
    // Mapped in place, as planned (llama.cpp's mmap). The hint costs nothing; on kernels whose page
    // cache uses large folios for the file system (Linux 6.18 ext4 here: FilePmdMapped), faults in
    // a VM_HUGEPAGE range map whole 2 MiB folios.
    const uintptr_t a = (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) / kHugePage * kHugePage;
    const uintptr_t b = (reinterpret_cast<uintptr_t>(data) + size) / kHugePage * kHugePage;
    if (b > a && cpu::InsideReadOnlyFileMapping(a, b))
      (void)madvise(reinterpret_cast<void*>(a), b - a, MADV_HUGEPAGE);
  }
  std::unique_ptr<HostBuffer> b(new HostBuffer());
  b->data_ = const_cast<uint8_t*>(data);  // mapped read-only: kernels never write weights
  b->size_ = size;
  return b;
}

HostBuffer::~HostBuffer() {
  if (owned_) munmap(data_, MappedLength(size_, PageSize()));
}

Status HostBuffer::Write(uint64_t offset, const void* src, uint64_t n) {
  if (!owned_) return Internal("write into a mapped (read-only) buffer");
  if (offset > size_ || n > size_ - offset) return OutOfRange("buffer write outside the buffer");
  std::memcpy(data_ + offset, src, n);
  return Status::Ok();
}

Status HostBuffer::Read(uint64_t offset, void* dst, uint64_t n) const {
  if (offset > size_ || n > size_ - offset) return OutOfRange("buffer read outside the buffer");
  std::memcpy(dst, data_ + offset, n);
  return Status::Ok();
}

}  // namespace stowage::exec
