// CPU and host-memory probing: /proc/cpuinfo, CPUID + XGETBV, sysinfo(2), /proc/meminfo.
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "stowage/runtime/device_probe.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define STOWAGE_X86 1
#endif

namespace stowage {
namespace {

#ifdef STOWAGE_X86
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

bool Cpuid(unsigned leaf, unsigned sub, Regs* r) {
  return __get_cpuid_count(leaf, sub, &r->a, &r->b, &r->c, &r->d) != 0;
}

uint64_t Xgetbv0() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

bool Bit(unsigned v, int b) { return ((v >> b) & 1u) != 0; }
#endif

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace

std::vector<std::string> CpuFeatures::Names() const {
  std::vector<std::string> n;
  auto add = [&](bool on, const char* name) {
    if (on) n.push_back(name);
  };
  add(sse3, "sse3");
  add(ssse3, "ssse3");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx, "avx");
  add(avx2, "avx2");
  add(avx_vnni, "avx_vnni");
  add(avx512f, "avx512f");
  add(avx512dq, "avx512dq");
  add(avx512cd, "avx512cd");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512_vbmi, "avx512_vbmi");
  add(avx512_vnni, "avx512_vnni");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_fp16, "avx512_fp16");
  add(amx_tile, "amx_tile");
  add(amx_int8, "amx_int8");
  add(amx_bf16, "amx_bf16");
  return n;
}

CpuFeatures ProbeCpuFeatures() {
  CpuFeatures f;
#ifdef STOWAGE_X86
  Regs r1, r7, r71;
  if (!Cpuid(1, 0, &r1)) return f;
  f.sse3 = Bit(r1.c, 0);
  f.ssse3 = Bit(r1.c, 9);
  bool osxsave = Bit(r1.c, 27);
  uint64_t xcr0 = osxsave ? Xgetbv0() : 0;
  bool avx_state = (xcr0 & 0x6) == 0x6;                    // XMM + YMM
  bool avx512_state = avx_state && (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM_Hi256, Hi16_ZMM
  bool amx_state = (xcr0 & 0x60000) == 0x60000;            // XTILECFG + XTILEDATA
  f.avx = avx_state && Bit(r1.c, 28);
  f.fma = f.avx && Bit(r1.c, 12);
  f.f16c = f.avx && Bit(r1.c, 29);
  Regs r0;
  Cpuid(0, 0, &r0);
  if (r0.a >= 7 && Cpuid(7, 0, &r7)) {
    f.avx2 = f.avx && Bit(r7.b, 5);
    f.avx512f = avx512_state && Bit(r7.b, 16);
    f.avx512dq = f.avx512f && Bit(r7.b, 17);
    f.avx512cd = f.avx512f && Bit(r7.b, 28);
    f.avx512bw = f.avx512f && Bit(r7.b, 30);
    f.avx512vl = f.avx512f && Bit(r7.b, 31);
    f.avx512_vbmi = f.avx512f && Bit(r7.c, 1);
    f.avx512_vnni = f.avx512f && Bit(r7.c, 11);
    f.avx512_fp16 = f.avx512f && Bit(r7.d, 23);
    f.amx_bf16 = amx_state && Bit(r7.d, 22);
    f.amx_tile = amx_state && Bit(r7.d, 24);
    f.amx_int8 = amx_state && Bit(r7.d, 25);
    if (r7.a >= 1 && Cpuid(7, 1, &r71)) {
      f.avx_vnni = f.avx && Bit(r71.a, 4);
      f.avx512_bf16 = f.avx512f && Bit(r71.a, 5);
    }
  }
#endif
  return f;
}

CpuInfo ProbeCpu() {
  CpuInfo info;
  info.features = ProbeCpuFeatures();
#ifdef STOWAGE_X86
  Regs r0;
  if (Cpuid(0, 0, &r0)) {
    char v[13] = {0};
    std::memcpy(v, &r0.b, 4);
    std::memcpy(v + 4, &r0.d, 4);
    std::memcpy(v + 8, &r0.c, 4);
    info.vendor = v;
  }
#endif
  std::set<std::pair<std::string, std::string>> cores;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, phys;
  while (std::getline(cpuinfo, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = Trim(line.substr(0, colon)), value = Trim(line.substr(colon + 1));
    if (key == "model name" && info.model_name.empty()) info.model_name = value;
    if (key == "physical id") phys = value;
    if (key == "core id") cores.insert({phys, value});
  }
#ifdef STOWAGE_X86
  if (info.model_name.empty()) {
    Regs r;
    char brand[49] = {0};
    if (Cpuid(0x80000000u, 0, &r) && r.a >= 0x80000004u) {
      for (unsigned i = 0; i < 3; ++i) {
        Cpuid(0x80000002u + i, 0, &r);
        std::memcpy(brand + 16 * i, &r, 16);
      }
      info.model_name = Trim(brand);
    }
  }
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  info.logical_cores = n > 0 ? static_cast<int>(n) : 1;
  info.physical_cores = cores.empty() ? info.logical_cores : static_cast<int>(cores.size());

  struct sysinfo si;
  if (sysinfo(&si) == 0) {
    info.memory_total = static_cast<uint64_t>(si.totalram) * si.mem_unit;
    info.memory_free = static_cast<uint64_t>(si.freeram) * si.mem_unit;
  }
  std::ifstream meminfo("/proc/meminfo");
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream ss(line.substr(13));
      uint64_t kib = 0;
      if (ss >> kib) info.memory_free = kib * 1024;
      break;
    }
  }
  return info;
}

}  // namespace stowage
