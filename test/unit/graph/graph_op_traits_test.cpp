// Every node the graph builders emit fits its op's traits (ggml_ops.h): source counts in range,
// parameters of exactly the op's layout that decode (ggml_op_params.h), views exactly the view ops,
// and a shape rule (ggml_op_shapes.h) that its shape satisfies at the graph's worst case.
#include <gtest/gtest.h>

#include <string>

#include "stowage/planner/model_graphs.h"
#include "stowage/runtime/ggml_op_params.h"
#include "stowage/runtime/ggml_op_shapes.h"
#include "stowage/runtime/gguf_writer.h"
#include "synth.h"

namespace stowage::planner {
namespace {

void CheckNodes(const Graph& g, const std::string& what) {
  for (int n : g.nodes) {
    const Tensor& t = g.tensors[n];
    const GgmlOpTraits& tr = GetOpTraits(t.op);
    const std::string where = what + " " + g.name + " '" + t.name + "' (" + GgmlOpName(t.op) + ")";
    EXPECT_GE(static_cast<int>(t.srcs.size()), tr.min_srcs) << where;
    EXPECT_LE(static_cast<int>(t.srcs.size()), tr.max_srcs) << where;
    for (int j = 0; j < tr.min_srcs && j < static_cast<int>(t.srcs.size()); ++j)
      EXPECT_GE(t.srcs[j], 0) << where;
    EXPECT_GE(tr.n_iparams, 0) << where << ": parameters not modeled";
    const OpParamsRef p(t.iparams, t.fparams);
    // A view's memory is its source's (the planner's view_src) exactly when the traits say so.
    const int aliased = AliasedSource(t.op, t.srcs.size());
    EXPECT_EQ(t.view_src >= 0, aliased >= 0) << where;
    const Status dec = CheckParams(t.op, p);
    EXPECT_TRUE(dec.ok()) << where << ": " << dec.message();
    EXPECT_NE(GetShapeRuleKind(t.op), ShapeRuleKind::kNone) << where << ": no shape rule";
    const Bindings w = g.WorstCase();
    auto eval = [&w](const Shape& ne) {
      return Ne4{w.Eval(ne[0]), w.Eval(ne[1]), w.Eval(ne[2]), w.Eval(ne[3])};
    };
    SrcShapes srcs;
    for (int s : t.srcs) srcs.push_back(s >= 0 ? std::optional<Ne4>(eval(g.tensors[s].ne)) : std::nullopt);
    const Status shape = CheckShape(t.op, srcs, p, eval(t.ne));
    EXPECT_TRUE(shape.ok()) << where << ": " << shape.message();
  }
}

TEST(GraphOpTraits, EveryNodeOfEveryArchitectureFitsItsTraits) {
  for (const std::string& arch : synth::SupportedArchs()) {
    for (bool fa : {false, true}) {
      synth::ModelSpec spec;
      spec.arch = arch;
      spec.n_vocab = 64;
      GgufWriter w;
      ASSERT_TRUE(synth::BuildModel(spec, &w).ok()) << arch;
      auto bytes = w.WriteToBuffer();
      ASSERT_TRUE(bytes.ok()) << arch;
      auto f = GgufFile::Parse(bytes->data(), bytes->size(), arch + ".gguf");
      ASSERT_TRUE(f.ok()) << f.status().message();
      ContextConfig cfg;
      cfg.flash_attn = fa;
      auto m = BuildModelGraphs(**f, cfg);
      ASSERT_TRUE(m.ok()) << arch << ": " << m.status().message();
      const std::string what = arch + (fa ? " -fa" : "");
      CheckNodes(m->pp, what);
      CheckNodes(m->tg, what);
    }
  }
}

}  // namespace
}  // namespace stowage::planner
