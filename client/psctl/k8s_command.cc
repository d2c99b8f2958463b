#include "client/psctl/k8s_command.h"

#include <ostream>
#include <string>
#include <vector>

#include "client/psctl/k8s_render.h"

namespace psflow {
namespace {

class K8sRenderCommand : public Subcommand {
 public:
  K8sRenderCommand()
      : Subcommand(
            "k8s render", {},
            "psctl k8s render --image=IMAGE [--name=psflow] [--ps=N] "
            "[--workers=M]\n"
            "                 [--evaluator] [--gpus_per_worker=K] "
            "[--job=<file in image>]\n"
            "                 [--k8s_namespace=NS] [--storage=10Gi] "
            "[--storage_class=C]",
            "Kubernetes manifests (Indexed Jobs, headless Services, a volume\n"
            "claim) for a job of that size, on standard output.") {
    FlagSet& flags = mutable_flags();
    flags.AddString("image", &options_.image, "the psflow container image");
    flags.AddString("name", &options_.name, "prefix of object names");
    flags.AddString("k8s_namespace", &options_.ns, "namespace");
    flags.AddInt("ps", &options_.num_ps, "parameter servers");
    flags.AddInt("workers", &options_.num_workers, "workers");
    flags.AddBool("evaluator", &options_.evaluator, "run an evaluator");
    flags.AddInt("gpus_per_worker", &options_.gpus_per_worker,
                 "nvidia.com/gpu per worker (then --device=cuda)");
    flags.AddString("storage", &options_.storage,
                    "size of the checkpoint/log volume claim");
    flags.AddString("storage_class", &options_.storage_class,
                    "storage class of the claim (ReadWriteMany); default: "
                    "the cluster's default");
    flags.AddString("job", &job_,
                    "the job config; a relative path names a file in the "
                    "image, under /opt/psflow/");
  }

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    K8sRenderOptions options = options_;
    // A relative --job names a config inside the image's bundle.
    options.job_config =
        !job_.empty() && job_[0] == '/' ? job_ : "/opt/psflow/" + job_;
    absl::StatusOr<std::string> yaml = RenderK8sManifests(options);
    if (!yaml.ok()) {
      err << "psctl k8s render: " << yaml.status().message() << "\n";
      return kExitUsage;
    }
    out << *yaml;
    return kExitOk;
  }

 private:
  K8sRenderOptions options_;
  std::string job_ = "configs/fashion_mnist_mlp.json";
};

}  // namespace

std::unique_ptr<Subcommand> NewK8sRenderCommand() {
  return std::make_unique<K8sRenderCommand>();
}

}  // namespace psflow
