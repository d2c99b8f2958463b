// Container image references as Kubernetes and kustomize read them:
// [registry[:port]/]path[:tag][@digest]. `psctl k8s render` checks --image
// with this and splits it into the `images:` entry of its kustomization
// (kustomize matches an entry by the name alone). Pure functions.
#ifndef PSFLOW_CLIENT_PSCTL_IMAGE_REFERENCE_H_
#define PSFLOW_CLIENT_PSCTL_IMAGE_REFERENCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

struct ImageReference {
  std::string name;    // "registry.example:5000/ml/psflow"
  std::string tag;     // "1.2"; empty: none
  std::string digest;  // "sha256:..."; empty: none
};

// Splits `image`. A colon after the last '/' starts the tag (one before it
// is a registry's port), an '@' the digest. InvalidArgument, naming the
// flag `flag`, for a character outside letters, digits and "._-/:@" (so
// the parts never need YAML escaping), or an empty name, tag or digest.
absl::StatusOr<ImageReference> ParseImageReference(absl::string_view image,
                                                   absl::string_view flag);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_IMAGE_REFERENCE_H_
