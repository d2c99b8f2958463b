#include "common/host_port.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

constexpr absl::string_view kExample = "e.g. \"ps-0.example.com:2222\"";

absl::Status Invalid(absl::string_view address, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("\"", address, "\" ", problem));
}

absl::Status ValidateDnsOrIpv4Host(absl::string_view address,
                                   absl::string_view host) {
  if (host.size() > 253) {
    return Invalid(address, "has a host name longer than 253 characters");
  }
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    if (label.empty()) {
      return Invalid(address,
                     "has an empty label in its host name (leading, trailing "
                     "or doubled '.'); remove the extra dot");
    }
    if (label.size() > 63) {
      return Invalid(address,
                     "has a host name label longer than 63 characters");
    }
    if (label.front() == '-' || label.back() == '-') {
      return Invalid(address, absl::StrCat("has host name label \"", label,
                                           "\" that starts or ends with '-'"));
    }
    for (char c : label) {
      // Underscores are not valid in DNS names but appear in container
      // service names that resolvers accept; let them through.
      if (!absl::ascii_isalnum(c) && c != '-' && c != '_') {
        return Invalid(address,
                       absl::StrCat("has character '", std::string(1, c),
                                    "' in its host; use a DNS name, an IPv4 "
                                    "address or a bracketed IPv6 address"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateIpv6Host(absl::string_view address,
                              absl::string_view host) {
  if (host.empty() || !absl::StrContains(host, ':')) {
    return Invalid(address, "has brackets that do not hold an IPv6 address");
  }
  for (char c : host) {
    if (!absl::ascii_isxdigit(c) && c != ':' && c != '.') {
      return Invalid(address, absl::StrCat("has character '", std::string(1, c),
                                           "' in its IPv6 address"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ParsePort(absl::string_view address,
                              absl::string_view port) {
  if (port.empty()) {
    return Invalid(address, absl::StrCat("has an empty port; ", kExample));
  }
  for (char c : port) {
    if (!absl::ascii_isdigit(c)) {
      return Invalid(address, absl::StrCat("has port \"", port,
                                           "\", which is not a number; use "
                                           "1-65535"));
    }
  }
  int value = 0;
  if (port.size() > 5 || !absl::SimpleAtoi(port, &value) || value > 65535) {
    return Invalid(address, absl::StrCat("has port ", port,
                                         ", which is out of range; use "
                                         "1-65535"));
  }
  return value;
}

}  // namespace

std::string HostPort::ToString() const {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  if (address.empty()) {
    return Invalid(address,
                   absl::StrCat("is empty; give host:port, ", kExample));
  }
  for (char c : address) {
    if (absl::ascii_isspace(c)) {
      return Invalid(address, "contains whitespace; remove it");
    }
  }
  if (absl::StrContains(address, "://")) {
    return Invalid(address,
                   "has a URL scheme; give plain host:port (the protocol "
                   "comes from \"rpc_layer\")");
  }
  if (absl::StrContains(address, '/')) {
    return Invalid(address, "contains '/'; give plain host:port");
  }

  HostPort result;
  absl::string_view port;
  if (address.front() == '[') {
    size_t close = address.find(']');
    if (close == absl::string_view::npos) {
      return Invalid(address, "opens '[' without a closing ']'");
    }
    absl::string_view host = address.substr(1, close - 1);
    RETURN_IF_ERROR(ValidateIpv6Host(address, host));
    result.host = std::string(host);
    absl::string_view rest = address.substr(close + 1);
    if (rest.empty() || rest.front() != ':') {
      return Invalid(address,
                     absl::StrCat("has no port after the IPv6 address; write "
                                  "it as [",
                                  host, "]:2222"));
    }
    port = rest.substr(1);
  } else {
    size_t colons = std::count(address.begin(), address.end(), ':');
    if (colons == 0) {
      return Invalid(address, absl::StrCat("has no port; write it as host:"
                                           "port, e.g. \"",
                                           address, ":2222\""));
    }
    if (colons > 1) {
      return Invalid(address,
                     "looks like an IPv6 address without brackets; write it "
                     "as [address]:port, e.g. \"[::1]:2222\"");
    }
    size_t colon = address.find(':');
    absl::string_view host = address.substr(0, colon);
    if (host.empty()) {
      return Invalid(address, absl::StrCat("has an empty host; ", kExample));
    }
    RETURN_IF_ERROR(ValidateDnsOrIpv4Host(address, host));
    result.host = std::string(host);
    port = address.substr(colon + 1);
  }
  ASSIGN_OR_RETURN(result.port, ParsePort(address, port));
  return result;
}

}  // namespace psflow
