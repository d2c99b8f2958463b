#include "model/layers/layer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) {
  return shape.empty() ? "scalar" : absl::StrJoin(shape, "x");
}

void Layer::AddVariable(const std::string& suffix, Shape shape,
                        Initializer initializer, VariableUpdate update,
                        float momentum) {
  ModelVariable v;
  v.variable.name = absl::StrCat(name_, "/", suffix);
  v.variable.shape = std::move(shape);
  v.variable.update = update;
  v.variable.momentum = momentum;
  v.initializer = initializer;
  variables_.push_back(std::move(v));
}

}  // namespace psflow
