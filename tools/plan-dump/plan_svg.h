// plan-dump --svg: a plan as a picture (one standalone SVG document, no script), for people who
// would rather look than read. Four parts, top to bottom:
//   1. the title: model, flags, context;
//   2. memory: one bar per device, its buffers stacked by usage (weights, KV cache, compute,
//      output) against its free memory; a GPU's host buffers (CUDA_Host: pinned host memory) are
//      drawn in the CPU's bar, mapped weights (file pages) as an outlined segment after it; in a
//      plan across hosts each device is labelled with its host and the hosts are set apart;
//   3. weights and KV cache: tensor roles (attn_q, ffn_up_exps, cache_k, ...) x layers, each cell
//      filled with the colour of the buffer type that holds that role's tensor in that layer;
//      consecutive layers placed alike are one column ("blk.3-60"), so a 671B model's 61 layers
//      make a handful of columns; under them, per column, what one layer holds (weights + KV) and
//      where its experts are ("CPU_REPACK 5.91 GiB": 256 experts in three 3-D tensors); the legend
//      names each buffer type's device;
//   4. splits: per graph (pp, tg) its node range as a strip, one rectangle per split in its
//      backend's colour, split inputs (the copies made for a split) as ticks, and counts per backend.
// Every element has a <title> (a browser shows it on hover) with its exact figures.
// Readable at any size: every colour of a legend is distinct (devices from a qualitative palette,
// CPUs in greys -- another host's CPU "MPI<h>:CPU", a GPU-type device of the plan, is drawn as a
// CPU -- other buffer types from a third list, then the colour farthest from those used); a label
// is cut to its room with an ellipsis, its whole text in a <title>, by the advance widths of
// DejaVu Sans (Debian's sans-serif; the narrower Liberation Sans, Arial or Helvetica fit as well).
#pragma once

#include <string>

#include "stowage/plan/plan_generated.h"

namespace stowage::tools {

/// The SVG document of a verified plan `p` (stowage::PlanFile's root), ending with a newline.
std::string PlanSvg(const stowage::plan::Plan& p);

}  // namespace stowage::tools
