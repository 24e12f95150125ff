// HostBuffer (the CPU backend's buffers): zeroed, aligned, bounds-checked, and memory is committed
// only where written (anonymous mapping, no memset of the whole buffer).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"

namespace stowage::exec {
namespace {

// Resident pages of this process (/proc/self/statm, field 2) in bytes.
int64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long size = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return n == 2 ? int64_t(resident) * 4096 : -1;
}

TEST(HostBuffer, ZeroedAlignedAndBoundsChecked) {
  for (uint64_t align : {1ull, 64ull, 4096ull, 65536ull}) {
    for (uint64_t size : {0ull, 1ull, 100ull, 4096ull, 5000ull, (3ull << 20) + 7}) {
      auto b = HostBuffer::Allocate(size, align);
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ((*b)->size(), size);
      EXPECT_EQ(reinterpret_cast<uintptr_t>((*b)->base()) % std::max<uint64_t>(align, 64), 0u) << align;
      for (uint64_t i = 0; i < size; i += 997) ASSERT_EQ((*b)->base()[i], 0) << i;
      if (size > 0) {
        EXPECT_EQ((*b)->base()[size - 1], 0);
        const uint8_t v = 0x5a;
        ASSERT_TRUE((*b)->Write(size - 1, &v, 1).ok());
        uint8_t r = 0;
        ASSERT_TRUE((*b)->Read(size - 1, &r, 1).ok());
        EXPECT_EQ(r, v);
      }
      uint8_t x[2] = {0, 0};
      EXPECT_FALSE((*b)->Write(size, x, 1).ok());
      EXPECT_FALSE((*b)->Read(size, x, 1).ok());
      EXPECT_FALSE((*b)->Write(~uint64_t(0), x, 2).ok());
    }
  }
}

TEST(HostBuffer, BadAlignmentAndHugeSizesAreErrors) {
  EXPECT_FALSE(HostBuffer::Allocate(64, 3).ok());
  EXPECT_FALSE(HostBuffer::Allocate(64, 0).ok());
  auto huge = HostBuffer::Allocate(uint64_t(1) << 62, 64);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("cannot allocate"), std::string::npos) << huge.status().message();
}

// A 256 MiB buffer of which 1 MiB is written must not make 256 MiB resident (the 250 MiB logits
// buffer planned for n_batch outputs held that much RSS when Allocate memset the whole buffer).
TEST(HostBuffer, UntouchedPagesAreNotResident) {
  const int64_t before = ResidentBytes();
  if (before < 0) GTEST_SKIP() << "skipped: /proc/self/statm not readable";
  auto b = HostBuffer::Allocate(uint64_t(256) << 20, 64);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::vector<uint8_t> ones(1 << 20, 1);
  ASSERT_TRUE((*b)->Write(uint64_t(100) << 20, ones.data(), ones.size()).ok());
  const int64_t grown = ResidentBytes() - before;
  EXPECT_LT(grown, int64_t(64) << 20) << "resident memory grew by " << grown << " bytes";
  EXPECT_EQ((*b)->base()[(uint64_t(100) << 20) + 5], 1);
  EXPECT_EQ((*b)->base()[(uint64_t(200) << 20)], 0);
}

}  // namespace
}  // namespace stowage::exec

namespace stowage::exec {
namespace {

// The /proc/self/maps line of the mapping holding `p` ("" when none).
std::string MapsLine(const void* p) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return "";
  char line[1024];
  std::string found;
  const unsigned long a = reinterpret_cast<unsigned long>(p);
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= a && a < hi) {
      found = line;
      break;
    }
  }
  std::fclose(f);
  return found;
}

// Wrap of a read-only file mapping: the bytes stay the same at the same addresses, the 2 MiB-aligned
// interior becomes anonymous memory (huge pages, no longer file pages), writes stay refused, and the
// owner's munmap of the whole file mapping still works.
TEST(HostBuffer, WrapOfFileMappingKeepsBytesAndAddresses) {
  char path[] = "/tmp/stowage_host_buffer_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const size_t size = (size_t(9) << 20) + 12345;
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = uint8_t((i * 2654435761u) >> 13);
  ASSERT_EQ(write(fd, bytes.data(), size), ssize_t(size));
  void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  unlink(path);
  ASSERT_NE(map, MAP_FAILED);
  const uint8_t* data = static_cast<const uint8_t*>(map) + 777;
  const uint64_t n = size - 777 - 100;
  std::unique_ptr<HostBuffer> b = HostBuffer::Wrap(data, n, /*copy_to_huge_pages=*/true);
  EXPECT_EQ(b->base(), data);
  EXPECT_EQ(b->size(), n);
  EXPECT_EQ(std::memcmp(b->base(), bytes.data() + 777, n), 0);
  // An aligned address inside is no longer the file (no path in its maps line) where transparent
  // huge pages are on; either way its bytes are the file's.
  const uintptr_t inner = (reinterpret_cast<uintptr_t>(data) + (uint64_t(2) << 20) - 1) /
                          (uint64_t(2) << 20) * (uint64_t(2) << 20);
  const std::string line = MapsLine(reinterpret_cast<const void*>(inner));
  std::string thp;
  if (FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re")) {
    char buf[128] = {0};
    if (std::fgets(buf, sizeof buf, f)) thp = buf;
    std::fclose(f);
  }
  if (!thp.empty() && thp.find("[never]") == std::string::npos)
    EXPECT_EQ(line.find("stowage_host_buffer_"), std::string::npos) << line;
  uint8_t x = 1;
  EXPECT_FALSE(b->Write(0, &x, 1).ok());
  uint8_t r = 0;
  ASSERT_TRUE(b->Read(n - 1, &r, 1).ok());
  EXPECT_EQ(r, bytes[777 + n - 1]);
  b.reset();
  EXPECT_EQ(munmap(map, size), 0);
}

// Wrap without the copy option (the default) keeps the file mapping: no byte is copied.
TEST(HostBuffer, WrapOfFileMappingDefaultKeepsTheFilePages) {
  char path[] = "/tmp/stowage_host_buffer_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const size_t size = size_t(9) << 20;
  std::vector<uint8_t> bytes(size, 0x5a);
  ASSERT_EQ(write(fd, bytes.data(), size), ssize_t(size));
  void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(map, MAP_FAILED);
  const uint8_t* data = static_cast<const uint8_t*>(map);
  std::unique_ptr<HostBuffer> b = HostBuffer::Wrap(data, size);
  const uintptr_t inner = (reinterpret_cast<uintptr_t>(data) + (uint64_t(2) << 20) - 1) /
                          (uint64_t(2) << 20) * (uint64_t(2) << 20);
  EXPECT_NE(MapsLine(reinterpret_cast<const void*>(inner)).find("stowage_host_buffer_"), std::string::npos);
  EXPECT_EQ(b->base(), data);
  EXPECT_EQ(b->base()[size - 1], 0x5a);
  b.reset();
  EXPECT_EQ(munmap(map, size), 0);
  unlink(path);
}

// Wrap of memory that is not a file mapping (a heap vector) leaves it alone.
TEST(HostBuffer, WrapOfHeapMemoryIsUntouched) {
  std::vector<uint8_t> v(size_t(5) << 20, 7);
  const std::string before = MapsLine(v.data());
  std::unique_ptr<HostBuffer> b = HostBuffer::Wrap(v.data(), v.size(), /*copy_to_huge_pages=*/true);
  EXPECT_EQ(b->base(), v.data());
  EXPECT_EQ(MapsLine(v.data()), before);
  v[123] = 9;  // still our writable heap memory
  EXPECT_EQ(b->base()[123], 9);
}

}  // namespace
}  // namespace stowage::exec
