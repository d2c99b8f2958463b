// proto_json_schema: prints the JSON Schema of a message's proto3 JSON form
// (proto_json_schema.h) from a descriptor set.
//
//   protoc -I. --include_imports --include_source_info
//       --descriptor_set_out=set.pb proto/job_config.proto
//   proto_json_schema set.pb psflow.JobConfig "<title>" "<note>" > out.json
//
// Exits 0 with the schema on stdout; 1 naming the problem; 2 for usage.
#include <iostream>
#include <string>

#include "absl/status/statusor.h"
#include "common/file_util.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "tools/json_schema/proto_json_schema.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: proto_json_schema <descriptor set> <message full "
                 "name> <title> <note>\n";
    return 2;
  }
  const std::string set_path = argv[1];
  const std::string message = argv[2];
  absl::StatusOr<std::string> bytes =
      psflow::ReadFileToString(set_path, int64_t{64} << 20);
  if (!bytes.ok()) {
    std::cerr << "proto_json_schema: " << bytes.status().message() << "\n";
    return 1;
  }
  google::protobuf::FileDescriptorSet set;
  if (!set.ParseFromString(*bytes)) {
    std::cerr << "proto_json_schema: " << set_path
              << " is not a FileDescriptorSet (protoc --descriptor_set_out)\n";
    return 1;
  }
  // protoc --include_imports lists every file after its imports.
  google::protobuf::DescriptorPool pool;
  for (const google::protobuf::FileDescriptorProto& file : set.file()) {
    if (pool.BuildFile(file) == nullptr) {
      std::cerr << "proto_json_schema: " << set_path << ": cannot build "
                << file.name()
                << " (was the set written with --include_imports?)\n";
      return 1;
    }
  }
  const google::protobuf::Descriptor* root =
      pool.FindMessageTypeByName(message);
  if (root == nullptr) {
    std::cerr << "proto_json_schema: " << set_path << " has no message "
              << message << "; give its full name, e.g. psflow.JobConfig\n";
    return 1;
  }
  psflow::ProtoJsonSchemaOptions options;
  options.title = argv[3];
  options.note = argv[4];
  absl::StatusOr<std::string> schema = psflow::ProtoJsonSchema(*root, options);
  if (!schema.ok()) {
    std::cerr << "proto_json_schema: " << schema.status().message() << "\n";
    return 1;
  }
  std::cout << *schema;
  return std::cout.flush() ? 0 : 1;
}
