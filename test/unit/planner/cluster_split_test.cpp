// --split cost (cluster_split.h): the dynamic program against every split of small hand-written
// clusters, its memory bounds and links, and the -ts it hands the layer map.
#include "stowage/planner/cluster_split.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "stowage/planner/layer_map.h"

namespace stowage::planner {
namespace {

CostDevice Dev(const std::string& name, int host, double bandwidth, uint64_t capacity = UINT64_MAX) {
  CostDevice d;
  d.name = name;
  d.host = host;
  d.memory_bandwidth = bandwidth;
  d.capacity = capacity;
  return d;
}

CostSplitInput Chain(std::vector<CostDevice> devices, int n_layers, int n_hosts, double link_latency = 1e-6) {
  CostSplitInput in;
  in.devices = std::move(devices);
  in.n_hosts = n_hosts;
  in.activation_bytes = 4096;
  in.links.assign(n_hosts, std::vector<std::optional<CostLink>>(n_hosts));
  for (int a = 0; a < n_hosts; ++a)
    for (int b = 0; b < n_hosts; ++b)
      if (a != b) in.links[a][b] = CostLink{1e10, link_latency};
  for (int i = 0; i < n_layers; ++i) {
    CostLayer l;
    l.layer = i;
    l.bytes = 1000000;
    l.bytes_read = 1e6;
    in.layers.push_back(l);
  }
  return in;
}

// Every split of the layers over the devices, the least estimate (EstimateCostSplit), -1 if none.
double BruteForce(const CostSplitInput& in) {
  double best = -1;
  std::vector<int> counts(in.devices.size(), 0);
  std::function<void(size_t, int)> rec = [&](size_t d, int left) {
    if (d + 1 == in.devices.size()) {
      counts[d] = left;
      auto s = EstimateCostSplit(in, counts);
      if (s.ok() && (best < 0 || s->seconds_per_token < best)) best = s->seconds_per_token;
      return;
    }
    for (int n = 0; n <= left; ++n) {
      counts[d] = n;
      rec(d + 1, left - n);
    }
  };
  rec(0, static_cast<int>(in.layers.size()));
  return best;
}

TEST(ClusterSplit, AllOnTheFastestHostWhenItFits) {
  auto in = Chain({Dev("MPI1:CPU", 1, 1e9), Dev("MPI2:CPU", 2, 4e9)}, 4, 3);
  auto s = SolveCostSplit(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->layers_per_device, (std::vector<int>{0, 4}));
  EXPECT_NEAR(s->seconds_per_token, 4 * 1e6 / 4e9 + 2 * 1e-6 + 4096 / 1e10 + 4 / 1e10, 1e-12);
}

TEST(ClusterSplit, MemoryBoundsTheFastHost) {
  // The fast host holds two layers; the rest go to the slow one, before it in pipeline order.
  auto in = Chain({Dev("MPI1:CPU", 1, 1e9), Dev("MPI2:CPU", 2, 4e9, 2500000)}, 5, 3);
  auto s = SolveCostSplit(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->layers_per_device, (std::vector<int>{3, 2}));
  // The memory split by free memory (here 3:2 too) differs once the slow host has more memory.
  auto mem = EstimateCostSplit(in, {4, 1});
  ASSERT_TRUE(mem.ok());
  EXPECT_GT(mem->seconds_per_token, s->seconds_per_token);
  auto over = EstimateCostSplit(in, {2, 3});
  ASSERT_FALSE(over.ok());
  EXPECT_NE(
      over.status().message().find("device MPI2:CPU: its 3 layers take 2.86 MiB, expected at most 2.38 MiB"),
      std::string::npos)
      << over.status().message();
}

TEST(ClusterSplit, SlowLinksKeepLayersTogether) {
  // The fast host holds two of four layers. Over 1 us links the split pays; over 10 ms links the
  // hop costs more than the fast host saves (2 x 0.5 ms): one stage on host 1.
  auto fast = Chain({Dev("MPI1:CPU", 1, 1e9), Dev("MPI2:CPU", 2, 2e9, 2000000)}, 4, 3, 1e-6);
  auto s = SolveCostSplit(fast);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->layers_per_device, (std::vector<int>{2, 2}));
  auto slow = Chain({Dev("MPI1:CPU", 1, 1e9), Dev("MPI2:CPU", 2, 2e9, 2000000)}, 4, 3, 1e-2);
  s = SolveCostSplit(slow);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->layers_per_device, (std::vector<int>{4, 0}));
}

TEST(ClusterSplit, MissingLinkIsNoPath) {
  // Host 2 reaches host 0 only through host 1: without that link nothing is possible there.
  auto in = Chain({Dev("MPI1:CPU", 1, 1e9, 1500000), Dev("MPI2:CPU", 2, 1e9)}, 3, 3);
  for (auto [a, b] : {std::pair{1, 2}, std::pair{0, 2}}) {
    in.links[a][b].reset();
    in.links[b][a].reset();
  }
  auto s = SolveCostSplit(in);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.status().message().find("no contiguous split of the 3 offloaded layers fits"),
            std::string::npos);
  auto e = EstimateCostSplit(in, {1, 2});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no link between hosts 1 and 2"), std::string::npos)
      << e.status().message();
}

TEST(ClusterSplit, NoLinkAtAllNamesTheMissingLinks) {
  // Memory enough everywhere, but no host reaches host 0: the error names the links, not memory.
  auto in = Chain({Dev("MPI1:CPU", 1, 1e9), Dev("MPI2:CPU", 2, 1e9)}, 3, 3);
  for (auto& row : in.links)
    for (auto& l : row) l.reset();
  auto s = SolveCostSplit(in);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "no contiguous split of the 3 offloaded layers: no link between hosts 0-1, 0-2, 1-2 in the "
            "cluster file, expected one per pair of hosts a split crosses (or a chain of links)");
  // With the 0-1 link host 1 takes all three layers; the missing others do not matter.
  in.links[0][1] = in.links[1][0] = CostLink{1e10, 1e-6};
  s = SolveCostSplit(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->layers_per_device, (std::vector<int>{3, 0}));
}

TEST(ClusterSplit, WithoutItsOwnLinkAHopGoesThroughTheHostsBetween) {
  // Links 0-1 and 1-2 only (a chain): host 2 alone is reached through host 1, both ways.
  auto in = Chain({Dev("MPI1:CPU", 1, 1e9), Dev("MPI2:CPU", 2, 4e9)}, 4, 3);
  in.links[0][2].reset();
  in.links[2][0].reset();
  auto s = EstimateCostSplit(in, {0, 4});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_NEAR(s->link_seconds, 2 * (1e-6 + 4096 / 1e10) + 2 * (1e-6 + 4 / 1e10), 1e-15);
  auto best = SolveCostSplit(in);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(best->layers_per_device, (std::vector<int>{0, 4}));
}

TEST(ClusterSplit, ComputeBoundLayersUseThePeakOfTheirType) {
  CostDevice d = Dev("MPI1:CPU", 1, 1e12);
  d.peak_flops = {{"f32", 1e9}, {"f16", 4e9}};
  CostLayer l;
  l.bytes_read = 1e6;
  l.flops = {{"f16", 4e6}, {"q4_0", 1e6}};  // q4_0 has no figure: the f32 peak
  EXPECT_NEAR(CostLayerSeconds(d, l), 1e-3 + 1e-3, 1e-12);
  d.peak_flops.clear();  // no peak: memory-bound
  EXPECT_NEAR(CostLayerSeconds(d, l), 1e-6, 1e-15);
}

TEST(ClusterSplit, EqualsEverySplitsBest) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n_hosts = 2 + static_cast<int>(rng() % 3);
    std::vector<CostDevice> devs;
    for (int h = 0; h < n_hosts; ++h)
      for (int k = 0, n = h == 0 ? static_cast<int>(rng() % 2) : 1 + static_cast<int>(rng() % 2); k < n; ++k)
        devs.push_back(Dev("MPI" + std::to_string(h) + ":D" + std::to_string(k), h, 1e9 * (1 + rng() % 8),
                           rng() % 3 == 0 ? UINT64_MAX : 1000000ull * (1 + rng() % 4)));
    if (devs.empty()) continue;
    auto in = Chain(devs, 1 + static_cast<int>(rng() % 6), n_hosts, 1e-6 * (rng() % 2000));
    for (auto& l : in.layers) {
      l.bytes = 500000ull * (1 + rng() % 3);
      l.bytes_read = static_cast<double>(l.bytes);
    }
    for (int a = 0; a < n_hosts; ++a)
      for (int b = a + 1; b < n_hosts; ++b)
        if (rng() % 4 == 0) in.links[a][b].reset(), in.links[b][a].reset();
    const double best = BruteForce(in);
    auto s = SolveCostSplit(in);
    if (best < 0) {
      EXPECT_FALSE(s.ok()) << "trial " << trial;
      continue;
    }
    ASSERT_TRUE(s.ok()) << "trial " << trial << ": " << s.status().message();
    EXPECT_NEAR(s->seconds_per_token, best, 1e-9 * best) << "trial " << trial;
  }
}

TEST(ClusterSplit, TensorSplitGivesTheLayerMapTheCounts) {
  // The layer counts as -ts put every split point on a layer boundary of llama.cpp's float rule,
  // for both llamacpp compat rules and any -ngl.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int n_model = 1 + static_cast<int>(rng() % 6);
    DeviceSet ds;
    for (int i = 0; i <= n_model; ++i) {
      DeviceManifest d;
      d.name = i == n_model ? "CPU" : "MPI" + std::to_string(i + 1) + ":CPU";
      d.memory_free = 1 << 30;
      ds.devices.push_back(d);
    }
    ds.n_model = n_model;
    ds.cpu = n_model;
    const uint32_t n_layer = 1 + static_cast<uint32_t>(rng() % 130);
    const int ngl = trial % 3 == 0 ? 999 : static_cast<int>(rng() % (n_layer + 2));
    const LlamacppCompat compat = trial % 2 ? LlamacppCompat::k2026 : LlamacppCompat::kFeb25;
    auto base = AssignLayers(ds, n_layer, ngl, {}, compat);
    ASSERT_TRUE(base.ok());
    std::vector<int> counts(n_model, 0);
    for (int left = base->act_gpu_layers, d = 0; d < n_model; ++d) {
      counts[d] = d + 1 == n_model ? left : static_cast<int>(rng() % (left + 1));
      left -= counts[d];
    }
    auto lm = AssignLayers(ds, n_layer, ngl, TensorSplitOf(counts), compat);
    ASSERT_TRUE(lm.ok());
    std::vector<int> got(n_model, 0);
    for (int d : lm->device)
      if (d < n_model) ++got[d];
    EXPECT_EQ(got, counts) << "trial " << trial << ": n_layer " << n_layer << ", -ngl " << ngl;
  }
}

}  // namespace
}  // namespace stowage::planner
