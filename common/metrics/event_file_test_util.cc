#include "common/metrics/event_file_test_util.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/crc32c.h"
#include "gtest/gtest.h"

namespace psflow::testing {

std::vector<tensorflow::Event> ReadEvents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  std::vector<tensorflow::Event> events;
  auto fixed32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      v |= uint32_t(uint8_t(bytes[at + i])) << (8 * i);
    }
    return v;
  };
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (bytes.size() - pos < 12) {
      ADD_FAILURE() << path << ": a record header is cut at byte " << pos;
      break;
    }
    uint64_t length = 0;
    for (int i = 0; i < 8; ++i) {
      length |= uint64_t(uint8_t(bytes[pos + i])) << (8 * i);
    }
    if (length > bytes.size() - pos - 16) {
      ADD_FAILURE() << path << ": a record of " << length << " bytes at byte "
                    << pos << " runs past the end";
      break;
    }
    EXPECT_EQ(fixed32(pos + 8), MaskCrc32c(Crc32c(bytes.substr(pos, 8))));
    const std::string data = bytes.substr(pos + 12, length);
    EXPECT_EQ(fixed32(pos + 12 + length), MaskCrc32c(Crc32c(data)));
    tensorflow::Event event;
    EXPECT_TRUE(event.ParseFromString(data));
    events.push_back(event);
    pos += 12 + length + 4;
  }
  return events;
}

std::set<std::string> ScalarTagsIn(const std::string& dir) {
  std::set<std::string> tags;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) !=
        0) {
      continue;
    }
    for (const tensorflow::Event& event : ReadEvents(entry.path().string())) {
      for (const auto& value : event.summary().value()) {
        tags.insert(value.tag());
      }
    }
  }
  return tags;
}

}  // namespace psflow::testing
