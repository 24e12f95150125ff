// Internal: the create_tensor step of llama.cpp's load_tensors, shared by architecture builders.
#pragma once

#include <string>

#include "stowage/planner/graph.h"
#include "stowage/runtime/gguf.h"

namespace stowage::planner {

/// Flags of llama.cpp's create_tensor.
enum TensorFlags : unsigned { kRequired = 0, kNotRequired = 1, kDuplicated = 2 };

class WeightLoader {
 public:
  WeightLoader(const GgufFile& gguf, ModelGraphs& m) : gguf_(gguf), m_(m) {}

  /// Registers weight `name` with the expected shape (ggml order, trailing 1s optional), its layer
  /// (-1 input, n_layer output, else block), class and consuming op; returns the global id, or -1
  /// when absent and kNotRequired. A suffix "bias" makes the op ADD (llama.cpp create_tensor).
  /// Errors (kept in status(), one line naming the file and tensor): missing tensor; wrong shape
  /// ("expected [64, 64], got [64, 32]"); wrong type: 1-D tensors, norms, biases and other
  /// non-".weight" tensors and ssm_conv1d must be f32, matrices any float or quantized type.
  int Create(const std::string& name, std::vector<int64_t> ne, int layer, LayerClass cls, GgmlOp op,
             unsigned flags = kRequired);
  /// llama.cpp's TENSOR_SKIP for every tensor of block il ("blk.<il>.*": glm4moe's NextN / MTP
  /// blocks without load_mtp): counted as read, given no global (no buffer holds them, llama.cpp
  /// subtracts them from the model size).
  void SkipBlock(int il);
  /// Tensors of the file that no Create() or SkipBlock() consumed.
  std::vector<std::string> Unused() const;
  const Status& status() const { return status_; }
  /// Keeps `s` as status() unless an error is kept already (later Create() calls then do nothing).
  void Fail(Status s) {
    if (status_.ok()) status_ = std::move(s);
  }

 private:
  const GgufFile& gguf_;
  ModelGraphs& m_;
  Status status_;
  std::vector<std::string> used_;
};

/// "blk.<il>.<suffix>"
inline std::string Blk(int il, const char* suffix) { return "blk." + std::to_string(il) + "." + suffix; }

}  // namespace stowage::planner
