// psctl: the operator's command-line tool.
//
//   psctl tfconfig check [--tf_config=<file or JSON>]
//   psctl tfconfig gen --chief=... --ps=... --workers=... [--out=DIR]
//   psctl local --job=<file> --ps=N --workers=M [--evaluator] --dir=<dir>
//
//   psctl ckpt list|inspect|verify|export|restore ...
//
// More subcommands (deployment) join as the features behind them land. Exit
// status: 0 success, 1 the command failed (the message says why), 2 usage
// error.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_join.h"
#include "client/psctl/ckpt_commands.h"
#include "client/psctl/k8s_render.h"
#include "client/psctl/local_cluster.h"
#include "client/psctl/tfconfig_gen.h"
#include "client/psctl/tfconfig_report.h"
#include "common/tf_config_loader.h"

ABSL_FLAG(std::string, tf_config, "",
          "TF_CONFIG as inline JSON or a path to a JSON file; defaults to the "
          "TF_CONFIG environment variable");
ABSL_FLAG(std::string, job, "configs/fashion_mnist_mlp.json",
          "local: the job config");
ABSL_FLAG(int32_t, ps, 1, "local: parameter servers");
ABSL_FLAG(int32_t, workers, 2, "local: workers");
ABSL_FLAG(bool, evaluator, true, "local: run an evaluator");
ABSL_FLAG(bool, chief, false,
          "local: run a separate chief (otherwise worker 0 is the chief)");
ABSL_FLAG(std::string, dir, "/tmp/psflow-local",
          "local: directory for logs, TF_CONFIGs and result.json");
ABSL_FLAG(std::string, bin_dir, "",
          "local: directory holding ps/, worker/, chief/, evaluator/ "
          "binaries; defaults to the one psctl was built into");
ABSL_FLAG(std::string, device, "auto", "local: worker device");
ABSL_FLAG(bool, shared_memory, true,
          "local: let workers and the evaluator reach the servers through "
          "shared memory (false: loopback TCP, as between hosts)");
ABSL_FLAG(int32_t, timeout_s, 0, "local: give up after this many seconds");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "local: checkpoint directory; kept between runs, so a second run "
          "resumes (default <dir>/checkpoints, emptied at start)");
ABSL_FLAG(std::string, tensor, "", "ckpt inspect: one tensor (name@slot)");
ABSL_FLAG(std::string, image, "", "k8s render: the psflow container image");
ABSL_FLAG(std::string, name, "psflow", "k8s render: prefix of object names");
ABSL_FLAG(std::string, k8s_namespace, "default", "k8s render: namespace");
ABSL_FLAG(int32_t, gpus_per_worker, 0,
          "k8s render: nvidia.com/gpu per worker (then --device=cuda)");
ABSL_FLAG(std::string, storage, "10Gi",
          "k8s render: size of the checkpoint/log volume claim");
ABSL_FLAG(std::string, storage_class, "",
          "k8s render: storage class of the claim (ReadWriteMany)");
ABSL_FLAG(bool, values, false, "ckpt inspect: print the tensor's values");
ABSL_FLAG(std::string, format, "safetensors",
          "ckpt export: safetensors or npz");
ABSL_FLAG(std::string, out, "", "ckpt export: the file to write");
ABSL_FLAG(bool, include_slots, false,
          "ckpt export: also the optimizer slots, as name@slot");

namespace psflow {
namespace {

constexpr char kUsage[] =
    "psctl: operate psflow clusters.\n"
    "\n"
    "Usage:\n"
    "  psctl tfconfig check [--tf_config=<file or JSON>]\n"
    "      Validate this process's TF_CONFIG (environment variable or flag),\n"
    "      print its task, whether it acts as chief, and every peer.\n"
    "  psctl tfconfig gen --chief=HOST[:PORT] --ps=H1,H2 --workers=H1,H2\n"
    "                     [--evaluator=HOST] [--port=2222] [--out=DIR]\n"
    "      The TF_CONFIG of every task, as `export TF_CONFIG=...` lines or\n"
    "      one DIR/<task>.json per task.\n"
    "  psctl k8s render --image=IMAGE [--name=psflow] [--ps=N] "
    "[--workers=M]\n"
    "                   [--evaluator] [--gpus_per_worker=K] [--job=<file in "
    "image>]\n"
    "                   [--k8s_namespace=NS] [--storage=10Gi] "
    "[--storage_class=C]\n"
    "      Kubernetes manifests (Indexed Jobs, headless Services, a volume\n"
    "      claim) for a job of that size, on standard output.\n"
    "  psctl local [--job=<file>] [--ps=N] [--workers=M] [--evaluator]\n"
    "              [--chief] [--dir=<dir>] [--device=auto|cpu|cuda]\n"
    "              [--shared_memory=false]\n"
    "      Run a whole cluster on 127.0.0.1 and exit with the job's result.\n"
    "  psctl ckpt list <dir>\n"
    "      The checkpoints of a directory, newest and kept ones marked.\n"
    "  psctl ckpt inspect <dir>/ckpt-<step> [--tensor=name[@slot]] "
    "[--values]\n"
    "      Tensors, shapes, dtypes and sizes; values on request.\n"
    "  psctl ckpt verify <dir>/ckpt-<step>\n"
    "      Check every CRC; exit 1 naming each damaged tensor and file.\n"
    "  psctl ckpt export <dir>/ckpt-<step> --format=safetensors|npz "
    "--out=<file>\n"
    "              [--include_slots]\n"
    "      Write the model for other tools.\n"
    "  psctl ckpt restore <dir>/ckpt-<step> [--tf_config=<file or JSON>]\n"
    "      Restore into the running job whose TF_CONFIG is given: the chief\n"
    "      pauses the workers, restores, and training resumes from there.\n";

int RunTfConfigCheck() {
  absl::StatusOr<LoadedTfConfig> loaded =
      LoadTfConfigFromFlagOrEnvironment(absl::GetFlag(FLAGS_tf_config));
  if (!loaded.ok()) {
    std::cerr << "psctl tfconfig check: " << loaded.status().message() << "\n";
    return 1;
  }
  std::cout << FormatTfConfigReport(*loaded);
  return 0;
}

// bazel-bin/client/psctl/psctl -> bazel-bin: where the role binaries are
// built (and the same layout in the relocatable bundle).
std::string DefaultBinDir() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string dir(path, n);
  for (int up = 0; up < 3; ++up) dir = dir.substr(0, dir.rfind('/'));
  return dir;
}

int RunLocal() {
  LocalClusterOptions options;
  options.job_path = absl::GetFlag(FLAGS_job);
  options.num_ps = absl::GetFlag(FLAGS_ps);
  options.num_workers = absl::GetFlag(FLAGS_workers);
  options.evaluator = absl::GetFlag(FLAGS_evaluator);
  options.chief = absl::GetFlag(FLAGS_chief);
  options.dir = absl::GetFlag(FLAGS_dir);
  options.bin_dir = absl::GetFlag(FLAGS_bin_dir).empty()
                        ? DefaultBinDir()
                        : absl::GetFlag(FLAGS_bin_dir);
  options.device = absl::GetFlag(FLAGS_device);
  options.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  options.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  absl::StatusOr<int> code = RunLocalCluster(options, std::cout);
  if (!code.ok()) {
    std::cerr << "psctl local: " << code.status().message() << "\n";
    return 2;
  }
  return *code;
}

int UsageError(const std::vector<std::string>& args) {
  std::cerr << "psctl: unknown command \"" << absl::StrJoin(args, " ")
            << "\"\n\n"
            << kUsage;
  return 2;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  // `tfconfig gen` has flags of its own (--ps and --workers are host lists
  // there, counts for `local`), so it parses its arguments itself.
  if (argc >= 3 && std::string(argv[1]) == "tfconfig" &&
      std::string(argv[2]) == "gen") {
    return RunTfConfigGen(std::vector<std::string>(argv + 3, argv + argc),
                          std::cout, std::cerr);
  }
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  std::vector<std::string> args(positional.begin() + 1, positional.end());
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  if (args == std::vector<std::string>{"tfconfig", "check"}) {
    return RunTfConfigCheck();
  }
  if (args == std::vector<std::string>{"local"}) return RunLocal();
  if (args == std::vector<std::string>{"k8s", "render"}) {
    K8sRenderOptions options;
    options.image = absl::GetFlag(FLAGS_image);
    options.name = absl::GetFlag(FLAGS_name);
    options.ns = absl::GetFlag(FLAGS_k8s_namespace);
    options.num_ps = absl::GetFlag(FLAGS_ps);
    options.num_workers = absl::GetFlag(FLAGS_workers);
    options.evaluator = absl::GetFlag(FLAGS_evaluator);
    options.gpus_per_worker = absl::GetFlag(FLAGS_gpus_per_worker);
    options.storage = absl::GetFlag(FLAGS_storage);
    options.storage_class = absl::GetFlag(FLAGS_storage_class);
    const std::string job = absl::GetFlag(FLAGS_job);
    // A relative --job names a config inside the image's bundle.
    options.job_config =
        !job.empty() && job[0] == '/' ? job : "/opt/psflow/" + job;
    absl::StatusOr<std::string> yaml = RenderK8sManifests(options);
    if (!yaml.ok()) {
      std::cerr << "psctl k8s render: " << yaml.status().message() << "\n";
      return 2;
    }
    std::cout << *yaml;
    return 0;
  }
  if (args.size() == 3 && args[0] == "ckpt") {
    if (args[1] == "list") return CkptList(args[2], std::cout, std::cerr);
    if (args[1] == "inspect") {
      return CkptInspect(args[2], absl::GetFlag(FLAGS_tensor),
                         absl::GetFlag(FLAGS_values), std::cout, std::cerr);
    }
    if (args[1] == "verify") return CkptVerify(args[2], std::cout, std::cerr);
    if (args[1] == "restore") {
      return CkptRestore(args[2], absl::GetFlag(FLAGS_tf_config), std::cout,
                         std::cerr);
    }
    if (args[1] == "export") {
      return CkptExport(
          args[2], absl::GetFlag(FLAGS_format), absl::GetFlag(FLAGS_out),
          absl::GetFlag(FLAGS_include_slots), std::cout, std::cerr);
    }
  }
  return UsageError(args);
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) { return psflow::Main(argc, argv); }
