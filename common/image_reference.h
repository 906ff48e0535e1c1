// ImageReference: whether a string is a container image reference as the
// Docker / OCI distribution grammar defines it (github.com/distribution/reference,
// reference.go):
//   [DOMAIN[:PORT]/]PATH[:TAG][@DIGEST]
// DOMAIN is dot-separated DNS labels (letters, digits, '-') or "localhost";
// PATH is '/'-separated components of lower-case letters and digits joined by
// one '.', one or two '_', or any number of '-'; TAG is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127};
// DIGEST is ALGORITHM:HEX (sha256 with 64 lower-case hex digits). At most 255
// characters before the tag. Pure function; thread-safe.
#pragma once

#include <string>

namespace tencache {

// "" when `ref` is a valid image reference; otherwise what is wrong with it
// ("a path component has upper-case letters", ...), for an error message.
std::string ImageReferenceProblem(const std::string& ref);

}  // namespace tencache
