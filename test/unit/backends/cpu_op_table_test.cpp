// The CPU backend's one op table (runtime/src/backends/cpu/cpu_op_table.h): CpuBackend::Compute
// refuses exactly the ops outside it, and what it runs the probed CPU device accepts (SET_ROWS, the
// KV-cache row store, end to end).
#include "cpu_op_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend.h"
#include "stowage/runtime/device_probe.h"

namespace stowage::exec {
namespace {

TEST(CpuOpTable, ComputeRefusesTheOpsOutsideTheTable) {
  auto cpu = CreateCpuBackend(1);
  int refused = 0;
  for (size_t i = 0; i < static_cast<size_t>(GgmlOp::kCount); ++i) {
    const auto op = static_cast<GgmlOp>(i);
    if (CpuTableHasOp(op)) continue;
    NodeCall c;
    c.op = op;
    c.name = "n";
    for (bool& has : c.has_src) has = true;  // past the required-source check
    Status s = cpu->Compute(c);
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << GgmlOpName(op);
    EXPECT_EQ(s.message(),
              std::string("CPU backend: op ") + GgmlOpName(op) + " (node 'n') is not implemented");
    ++refused;
  }
  EXPECT_GT(refused, 0);
  for (GgmlOp op : {GgmlOp::SET_ROWS, GgmlOp::DUP, GgmlOp::CPY, GgmlOp::MUL_MAT, GgmlOp::SSM_SCAN})
    EXPECT_TRUE(CpuTableHasOp(op)) << GgmlOpName(op);
}

TensorView View(GgmlType type, int64_t ne0, int64_t ne1, void* data) {
  TensorView t;
  t.type = type;
  t.ne[0] = ne0;
  t.ne[1] = ne1;
  t.data = data;
  SetContiguousStrides(t);
  return t;
}

TensorDesc Desc(const TensorView& v) {
  TensorDesc d;
  d.type = v.type;
  for (int i = 0; i < 4; ++i) d.ne[i] = v.ne[i];
  d.buft = "CPU";
  d.buft_is_host = true;
  return d;
}

TEST(CpuOpTable, SetRowsRunsAndTheProbedDeviceAcceptsIt) {
  std::vector<float> src = {1, 2, 3, 4, 5, 6, 7, 8};  // two rows of 4
  std::vector<int64_t> idx = {2, 0};
  std::vector<float> dst(3 * 4, -1.0f);
  NodeCall c;
  c.op = GgmlOp::SET_ROWS;
  c.name = "kv_store";
  c.dst = View(GgmlType::F32, 4, 3, dst.data());
  c.src[0] = View(GgmlType::F32, 4, 2, src.data());
  c.src[1] = View(GgmlType::I64, 2, 1, idx.data());
  c.has_src[0] = c.has_src[1] = true;
  ASSERT_TRUE(CreateCpuBackend(1)->Compute(c).ok());
  EXPECT_EQ(dst, (std::vector<float>{5, 6, 7, 8, -1, -1, -1, -1, 1, 2, 3, 4}));

  OpQuery q;
  q.op = GgmlOp::SET_ROWS;
  q.dst = Desc(c.dst);
  q.src = {Desc(c.src[0]), Desc(c.src[1])};
  const ProbedDevice cpu = MakeCpuDevice(CpuInfo{});
  EXPECT_TRUE(cpu.SupportsOp(q));
  q.dst.type = GgmlType::F16;  // the KV cache's usual type
  EXPECT_TRUE(cpu.SupportsOp(q));
  q.src[0].type = GgmlType::F16;  // cpu::SetRows takes F32 rows only
  EXPECT_FALSE(cpu.SupportsOp(q));
}

}  // namespace
}  // namespace stowage::exec
