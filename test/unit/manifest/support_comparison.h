// Comparing a runtime device's supports_op (ProbedDevice::SupportsOp) with a manifest's
// (DeviceManifest::SupportsOp) over many queries: every op x source types x destination types,
// then every op over buffer placements, shapes, batch sizes, contiguity and an optional third
// source. Used by probe_agreement_test (emitted manifests equal their backend) and op_table_test
// (the shipped manifests' tables against Stowage's backends).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "stowage/planner/manifest.h"
#include "stowage/runtime/device_probe.h"

namespace stowage::planner::support_check {

inline std::vector<GgmlType> AllTypes() {
  std::vector<GgmlType> out;
  for (uint32_t i = 0; i < kGgmlTypeCount; ++i) {
    if (IsValidGgmlType(i)) out.push_back(static_cast<GgmlType>(i));
  }
  return out;
}

inline TensorDesc Tensor(GgmlType type, std::array<int64_t, 4> ne, const std::string& buft = "",
                         bool host = false) {
  TensorDesc t;
  t.type = type;
  t.ne = ne;
  t.buft = buft;
  t.buft_is_host = host;
  return t;
}

/// "MUL_MAT dst f32; srcs: q4_0[256,256,1]@CPU f32[256,64,1]@-(nc)", for messages.
inline std::string Describe(const OpQuery& rq) {
  std::string s = std::string(GgmlOpName(rq.op)) + " dst " + GgmlTypeName(rq.dst.type) + "; srcs:";
  for (const auto& t : rq.src) {
    s += std::string(" ") + GgmlTypeName(t.type) + "[" + std::to_string(t.ne[0]) + "," +
         std::to_string(t.ne[1]) + "," + std::to_string(t.ne[2]) + "]@" + (t.buft.empty() ? "-" : t.buft) +
         (t.contiguous ? "" : "(nc)");
  }
  return s;
}

/// Calls f(query) for every query of the comparison (about a million): every op x src0 type x
/// src1 type (each possibly absent) x five dst types (I32 for ARGSORT), then every op over buffer placements,
/// shapes (ne1 % 8, 3-D), batch sizes, contiguity and an optional third source.
template <class F>
void ForEachQuery(F&& f) {
  const auto types = AllTypes();
  const GgmlType dst_types[] = {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::IQ2_XXS,
                                GgmlType::I32};
  for (size_t oi = 0; oi < kGgmlOpCount; ++oi) {
    auto op = static_cast<GgmlOp>(oi);
    OpQuery rq;
    rq.op = op;
    for (int t0 = -1; t0 < static_cast<int>(types.size()); ++t0) {
      for (int t1 = -1; t1 < static_cast<int>(types.size()); ++t1) {
        if (t0 < 0 && t1 >= 0) continue;  // sources are filled in order
        rq.src.clear();
        if (t0 >= 0) rq.src.push_back(Tensor(types[t0], {256, 256, 1, 1}, "CPU", true));
        if (t1 >= 0) rq.src.push_back(Tensor(types[t1], {256, 64, 1, 1}));
        for (GgmlType dt : dst_types) {
          rq.dst = Tensor(dt, {256, 64, 1, 1});
          f(static_cast<const OpQuery&>(rq));
        }
      }
    }
    struct Placement {
      const char* buft0;
      bool host0;
      const char* buft1;
      bool host1;
    };
    const Placement placements[] = {
        {"", false, "", false},       {"CPU", true, "", false},       {"CPU_REPACK", false, "", false},
        {"CUDA0", false, "", false},  {"CPU", true, "CUDA0", false},  {"CUDA_Host", true, "CPU", true},
        {"ONEDNN", false, "", false}, {"ONEDNN", false, "CPU", true}, {"CPU", true, "ONEDNN", false}};
    const GgmlType t0s[] = {GgmlType::F32,  GgmlType::BF16, GgmlType::F16,
                            GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q6_K};
    const GgmlType t1s[] = {GgmlType::F32, GgmlType::I32, GgmlType::F16};
    for (const auto& p : placements) {
      for (GgmlType a : t0s) {
        for (GgmlType b : t1s) {
          for (int64_t ne1 : {256, 260}) {
            for (int64_t ne2 : {1, 4}) {
              for (int64_t batch : {1, 31, 32, 169}) {
                for (bool contiguous : {true, false}) {
                  for (bool third : {false, true}) {
                    rq.src = {Tensor(a, {256, ne1, ne2, 1}, p.buft0, p.host0),
                              Tensor(b, {256, batch, ne2, 1}, p.buft1, p.host1)};
                    rq.src[1].contiguous = contiguous;
                    if (third) rq.src.push_back(Tensor(GgmlType::F32, {64, 1, 1, 1}));
                    rq.dst = Tensor(GgmlType::F32, {ne1, batch, ne2, 1});
                    f(static_cast<const OpQuery&>(rq));
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

struct Comparison {
  size_t queries = 0, supported = 0, mismatches = 0;
  std::string first_mismatch;
};

/// Asks both over ForEachQuery; `supported` counts the runtime's yes answers.
inline Comparison CompareAll(const ProbedDevice& dev, const DeviceManifest& m) {
  Comparison c;
  ForEachQuery([&](const OpQuery& rq) {
    bool runtime = dev.SupportsOp(rq);
    bool manifest = m.SupportsOp(rq);
    ++c.queries;
    c.supported += runtime;
    if (runtime != manifest && c.mismatches++ == 0)
      c.first_mismatch = dev.name + " " + Describe(rq) + ": runtime " + (runtime ? "yes" : "no") +
                         ", manifest " + (manifest ? "yes" : "no");
  });
  return c;
}

}  // namespace stowage::planner::support_check
