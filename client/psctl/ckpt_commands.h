// `psctl ckpt ...`: list, inspect, verify, export and restore checkpoints
// (docs/checkpoint-format.md): the subcommands with their flags, and the
// functions they run. Each function returns the process exit status
// (0 success, 1 failure or damage) and writes its report to `out`, errors
// to `err`.
#ifndef PSFLOW_CLIENT_PSCTL_CKPT_COMMANDS_H_
#define PSFLOW_CLIENT_PSCTL_CKPT_COMMANDS_H_

#include <memory>
#include <ostream>
#include <string>

#include "client/psctl/subcommand.h"
#include "common/rpc/security_flags.h"

namespace psflow {

// The checkpoints of a directory, oldest first: step, size, age, whether
// the state file lists it, which is newest; and crash leftovers.
int CkptList(const std::string& dir, std::ostream& out, std::ostream& err);

// Every tensor's name, slot, dtype, shape and size; with `tensor`, only
// that one (name or name@slot) and, with `values`, its values.
int CkptInspect(const std::string& path, const std::string& tensor, bool values,
                std::ostream& out, std::ostream& err);

// Reads every slice and checks its CRC-32C; exits 1 naming each damaged
// tensor and file.
int CkptVerify(const std::string& path, std::ostream& out, std::ostream& err);

// Writes the checkpoint as safetensors or npz (metadata naming the model,
// its input and the layouts, when the model is known), or its model as
// ONNX. The model is the one the checkpoint records, or `job_path`'s when
// given (client/psctl/checkpoint_model.h). `out_path` must be a new file,
// or an existing regular one with `overwrite`, outside the checkpoint
// (client/psctl/export_target.h).
int CkptExport(const std::string& path, const std::string& format,
               const std::string& out_path, bool include_slots, bool overwrite,
               const std::string& job_path, std::ostream& out,
               std::ostream& err);

// Asks the chief of the running job described by `tf_config` to pause
// training, restore `path` onto the parameter servers and resume; `tls`
// are psctl's credentials (tls_flags.h).
int CkptRestore(const std::string& path, const std::string& tf_config_flag,
                const SecuritySettings& tls, std::ostream& out,
                std::ostream& err);

// The subcommands: `psctl ckpt list <dir>`, `psctl ckpt inspect <ckpt>
// [--tensor=] [--values]`, `psctl ckpt verify <ckpt>`, `psctl ckpt export
// <ckpt> --format= --out= [--include_slots] [--job=]` and `psctl ckpt restore
// <ckpt>
// [--tf_config=]`, running the functions above.
std::unique_ptr<Subcommand> NewCkptListCommand();
std::unique_ptr<Subcommand> NewCkptInspectCommand();
std::unique_ptr<Subcommand> NewCkptVerifyCommand();
std::unique_ptr<Subcommand> NewCkptExportCommand();
std::unique_ptr<Subcommand> NewCkptRestoreCommand();

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_CKPT_COMMANDS_H_
