// A graph node (graph_spec.h) on one Device for batches of up to max_batch
// examples: a single-input layer's kernel, or the layers that read several
// inputs (Concatenate, Add, Multiply, DotInteraction, Cross,
// FactorizationMachine) written with the Device's ops.
//
// Backward gets each input's gradient array, or null for an input that
// needs none (the example's features), and whether to add to it (another
// node that reads the same value wrote its share already) or overwrite
// it. An input named twice gets the same array twice: its second share
// is added. Used by one thread at a time.
#ifndef PSFLOW_MODEL_GRAPH_NODE_KERNELS_H_
#define PSFLOW_MODEL_GRAPH_NODE_KERNELS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/device/device.h"
#include "model/graph/graph_spec.h"
#include "model/layers/layer.h"

namespace psflow {

class NodeKernel {
 public:
  virtual ~NodeKernel() = default;

  // y[batch x output] from the inputs (each [batch x its shape]).
  virtual absl::Status Forward(const StepContext& step,
                               const std::vector<const DeviceArray*>& x,
                               DeviceArray& y) = 0;

  // After a training Forward of the same inputs: writes the node's
  // variables' gradients and each non-null dx[i] (added to it when
  // accumulate[i]) from dy, which it may overwrite.
  virtual absl::Status Backward(const StepContext& step,
                                const std::vector<const DeviceArray*>& x,
                                const DeviceArray& y, DeviceArray& dy,
                                const std::vector<DeviceArray*>& dx,
                                const std::vector<bool>& accumulate) = 0;
};

// `node` on `device`; `arrays` (the node's variables, in its variables()
// order) stay valid for the kernel's lifetime.
absl::StatusOr<std::unique_ptr<NodeKernel>> InstantiateNode(
    const GraphNode& node, Device* device, int64_t max_batch,
    const LayerArrays& arrays);

// Device floats per example a node's kernel allocates beyond its output
// and the output's gradient (for the job's memory estimate).
int64_t NodeScratchFloatsPerExample(const GraphNode& node);
// The most floats of it a batch of any size takes on the CPU backend (0:
// no cap); Layer::ScratchCapFloats.
int64_t NodeScratchCapFloats(const GraphNode& node);
// Floats per CPU thread beyond that; Layer::ScratchFloatsPerThread.
int64_t NodeScratchFloatsPerThread(const GraphNode& node);
// Floats held once beyond that; Layer::ScratchFloatsFixed.
int64_t NodeScratchFloatsFixed(const GraphNode& node);

}  // namespace psflow

#endif  // PSFLOW_MODEL_GRAPH_NODE_KERNELS_H_
