// Every error of the place attribute and op verifiers.
// REQUIRES: mlir
// RUN: stowage-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{device name must not be empty}}
func.func private @f() attributes {place.device = #place.device<"", gpu>}

// -----

// expected-error @+2 {{expected ::stowage::place::DeviceType to be one of: cpu, gpu, igpu, accel}}
// expected-error @+1 {{failed to parse Place_DeviceAttr parameter 'type'}}
func.func private @f() attributes {place.device = #place.device<"TPU0", tpu>}

// -----

// expected-error @+1 {{buffer type name must not be empty}}
func.func private @f() attributes {place.buft = #place.buft<"", "CPU", default>}

// -----

// expected-error @+1 {{buffer type 'CUDA_Host' needs a device name}}
func.func private @f() attributes {place.buft = #place.buft<"CUDA_Host", "", host>}

// -----

// expected-error @+2 {{expected ::stowage::place::BuftKind to be one of: default, host, split, extra, mapped}}
// expected-error @+1 {{failed to parse Place_BufferTypeAttr parameter 'kind'}}
func.func private @f() attributes {place.buft = #place.buft<"CPU", "CPU", pinned>}

// -----

// expected-error @+1 {{backend name must not be empty}}
func.func private @f() attributes {place.backend = #place.backend<"", 0>}

// -----

// expected-error @+1 {{backend priority must be in [0, 16) (GGML_SCHED_MAX_BACKENDS), got 16}}
func.func private @f() attributes {place.backend = #place.backend<"CPU", 16>}

// -----

// expected-error @+1 {{backend priority must be in [0, 16) (GGML_SCHED_MAX_BACKENDS), got -1}}
func.func private @f() attributes {place.backend = #place.backend<"CPU", -1>}

// -----

// expected-error @+1 {{unknown placement cause '5.new'}}
func.func private @f() attributes {place.cause = #place.cause<"5.new">}

// -----

// "1.wgt" always names the source index (ggml prints "1.wgt%d").
// expected-error @+1 {{unknown placement cause '1.wgt'}}
func.func private @f() attributes {place.cause = #place.cause<"1.wgt">}

// -----

// expected-error @+1 {{unknown placement cause '1.wgt10'}}
func.func private @f() attributes {place.cause = #place.cause<"1.wgt10">}

// -----

func.func @f() {
  // expected-error @+1 {{attribute 'place.buft' must be a #place.buft, got #place.backend<"CPU", 0>}}
  %w = ggml.weight "w" {place.buft = #place.backend<"CPU", 0>} : !ggml.tensor<[4], f32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{attribute 'place.backend' must be a #place.backend, got "CUDA0"}}
  %w = ggml.weight "w" {place.backend = "CUDA0"} : !ggml.tensor<[4], f32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{attribute 'place.cause' must be a #place.cause, got "1.wgt0"}}
  %w = ggml.weight "w" {place.cause = "1.wgt0"} : !ggml.tensor<[4], f32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{attribute 'place.device' must be a #place.device, got #place.buft<"CPU", "CPU", default>}}
  %w = ggml.weight "w" {place.device = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[4], f32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{unknown placement attribute 'place.layer' (expected place.buft, place.backend, place.cause, place.device or place.devices)}}
  %w = ggml.weight "w" {place.layer = 3 : i32} : !ggml.tensor<[4], f32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{index must be >= 0, got -1}}
  place.split -1 on #place.backend<"CPU", 0> {
    place.yield
  }
  return
}

// -----

func.func @f() {
  place.split 0 on #place.backend<"CPU", 1> {
    // expected-error @+1 {{splits do not nest}}
    place.split 1 on #place.backend<"CPU", 1> {
      place.yield
    }
    place.yield
  }
  return
}

// -----

func.func @f() {
  place.split 3 on #place.backend<"CPU", 1> {
    place.yield
  }
  // expected-error @+1 {{split 2 follows split 3; indices must increase in graph order}}
  place.split 2 on #place.backend<"CUDA0", 0> {
    place.yield
  }
  return
}

// -----

func.func @f(%x: !ggml.tensor<[4], f32>) {
  // expected-error @+1 {{yields 1 values whose types differ from the split's 1 result types}}
  %r = place.split 0 on #place.backend<"CPU", 1> -> !ggml.tensor<[4], f16> {
    place.yield %x : !ggml.tensor<[4], f32>
  }
  return
}

// -----

func.func @f(%x: !ggml.tensor<[4], f32>) {
  // expected-error @+1 {{'place.yield' op expects parent op 'place.split'}}
  place.yield %x : !ggml.tensor<[4], f32>
}

// -----

func.func @f(%x: !ggml.tensor<[4], f32>) {
  place.split 0 on #place.backend<"CUDA0", 0> {
    // expected-error @+1 {{copies to #place.backend<"CPU", 1> inside a split on #place.backend<"CUDA0", 0>; a split's inputs go to its backend}}
    %c = place.copy %x : !ggml.tensor<[4], f32> to #place.backend<"CPU", 1>
    place.yield
  }
  return
}

// -----

func.func @f(%x: !ggml.tensor<[4], f32>) {
  place.split 0 on #place.backend<"CUDA0", 0> {
    %s = ggml.silu %x : (!ggml.tensor<[4], f32>) -> !ggml.tensor<[4], f32>
    // expected-error @+1 {{source is computed inside the same split; only values from earlier splits (or views of them) are split inputs}}
    %c = place.copy %s : !ggml.tensor<[4], f32> to #place.backend<"CUDA0", 0>
    place.yield
  }
  return
}

// -----

// expected-error @+1 {{attribute 'place.devices' must be an array of #place.device, got [#place.device<"CPU", cpu>, "CUDA0"]}}
module attributes {place.devices = [#place.device<"CPU", cpu>, "CUDA0"]} {}

// -----

func.func @f(%x: !ggml.tensor<[4, 2], f32>) {
  place.split 0 on #place.backend<"CUDA0", 0> {
    %s = ggml.silu %x : (!ggml.tensor<[4, 2], f32>) -> !ggml.tensor<[4, 2], f32>
    %t = ggml.transpose %s : (!ggml.tensor<[4, 2], f32>) -> !ggml.tensor<[2, 4], f32>
    // A view of a value computed in the same split is not an input either.
    // expected-error @+1 {{source is computed inside the same split; only values from earlier splits (or views of them) are split inputs}}
    %c = place.copy %t : !ggml.tensor<[2, 4], f32> to #place.backend<"CUDA0", 0>
    place.yield
  }
  return
}

// -----

// A backend runs on a device of the machine the module is placed for: on a node, a split and a copy.
module attributes {place.devices = [#place.device<"ONEDNN", accel>, #place.device<"CPU", cpu>]} {
  func.func @f(%x: !ggml.tensor<[4], f32>) -> !ggml.tensor<[4], f32> {
    // expected-error @+1 {{'ggml.silu' op backend 'CUDA9' is not a device of the module (place.devices: ONEDNN, CPU)}}
    %s = ggml.silu %x {place.backend = #place.backend<"CUDA9", 7>} : (!ggml.tensor<[4], f32>) -> !ggml.tensor<[4], f32>
    return %s : !ggml.tensor<[4], f32>
  }
}

// -----

module attributes {place.devices = [#place.device<"ONEDNN", accel>, #place.device<"CPU", cpu>]} {
  func.func @f() {
    // expected-error @+1 {{'place.split' op backend 'CUDA0' is not a device of the module (place.devices: ONEDNN, CPU)}}
    place.split 0 on #place.backend<"CUDA0", 0> {
      place.yield
    }
    return
  }
}

// -----

module attributes {place.devices = [#place.device<"ONEDNN", accel>, #place.device<"CPU", cpu>]} {
  func.func @f(%x: !ggml.tensor<[4], f32>) {
    // expected-error @+1 {{'place.copy' op backend 'CUDA0' is not a device of the module (place.devices: ONEDNN, CPU)}}
    %c = place.copy %x : !ggml.tensor<[4], f32> to #place.backend<"CUDA0", 0>
    return
  }
}
