#include "common/image_reference.h"

#include <cctype>

namespace tencache {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// One path component: lower-case alphanumerics separated by '.', '_', '__' or '-'+.
bool PathComponent(const std::string& s) {
  if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (size_t i = 0; i < s.size();) {
    if (IsLowerAlnum(s[i])) { ++i; continue; }
    size_t j = i;
    while (j < s.size() && !IsLowerAlnum(s[j])) ++j;
    const std::string sep = s.substr(i, j - i);
    const bool dashes = sep.find_first_not_of('-') == std::string::npos;
    if (!(sep == "." || sep == "_" || sep == "__" || dashes)) return false;
    i = j;
  }
  return true;
}

// DOMAIN[:PORT]: DNS labels of letters, digits and '-' (not at either end), joined by '.'.
bool Domain(const std::string& s) {
  std::string host = s;
  const size_t colon = s.rfind(':');
  if (colon != std::string::npos) {
    const std::string port = s.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return false;
    host = s.substr(0, colon);
  }
  if (host.empty()) return false;
  size_t start = 0;
  while (start <= host.size()) {
    size_t dot = host.find('.', start);
    if (dot == std::string::npos) dot = host.size();
    const std::string label = host.substr(start, dot - start);
    if (label.empty() || !IsAlnum(label.front()) || !IsAlnum(label.back())) return false;
    for (char c : label) {
      if (!IsAlnum(c) && c != '-') return false;
    }
    start = dot + 1;
  }
  return true;
}

bool Tag(const std::string& s) {
  if (s.empty() || s.size() > 128 || !(IsAlnum(s[0]) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(IsAlnum(c) || c == '_' || c == '.' || c == '-')) return false;
  }
  return true;
}

std::string DigestProblem(const std::string& d) {
  const size_t colon = d.find(':');
  if (colon == std::string::npos || colon == 0) return "the digest after '@' is not ALGORITHM:HEX";
  const std::string algorithm = d.substr(0, colon), hex = d.substr(colon + 1);
  if (algorithm != "sha256" && algorithm != "sha384" && algorithm != "sha512") {
    return "the digest algorithm '" + algorithm + "' is not sha256, sha384 or sha512";
  }
  const size_t want = algorithm == "sha256" ? 64 : algorithm == "sha384" ? 96 : 128;
  if (hex.size() != want) return "a " + algorithm + " digest has " + std::to_string(want) + " hex digits";
  for (char c : hex) {
    if (!IsHex(c)) return "the digest has characters other than lower-case hex digits";
  }
  return "";
}

}  // namespace

std::string ImageReferenceProblem(const std::string& ref) {
  if (ref.empty()) return "it is empty";
  for (char c : ref) {
    if (std::isspace(static_cast<unsigned char>(c)) || !std::isprint(static_cast<unsigned char>(c))) {
      return "it contains whitespace or a control character";
    }
  }
  std::string name = ref;
  if (const size_t at = name.find('@'); at != std::string::npos) {
    if (std::string p = DigestProblem(name.substr(at + 1)); !p.empty()) return p;
    name = name.substr(0, at);
  }
  // A tag is what follows the last ':' when no '/' comes after it (else the ':' is a port).
  const size_t colon = name.rfind(':');
  if (colon != std::string::npos && name.find('/', colon) == std::string::npos) {
    if (!Tag(name.substr(colon + 1))) {
      return "the tag '" + name.substr(colon + 1) + "' is not 1-128 of letters, digits, '_', '.', '-' (not starting with '.' or '-')";
    }
    name = name.substr(0, colon);
  }
  if (name.size() > 255) return "the name is longer than 255 characters";
  size_t first_slash = name.find('/');
  std::string path = name;
  if (first_slash != std::string::npos) {
    const std::string head = name.substr(0, first_slash);
    // The first component is a registry when it looks like a host: a '.', a ':' or localhost.
    if (head.find_first_of(".:") != std::string::npos || head == "localhost") {
      if (!Domain(head)) return "the registry '" + head + "' is not HOST[:PORT]";
      path = name.substr(first_slash + 1);
    }
  }
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    const std::string component = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!PathComponent(component)) {
      return "the path component '" + component + "' is not lower-case letters and digits joined by '.', '_', '__' or '-'";
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return "";
}

}  // namespace tencache
