// SHA-256 digests (OpenSSL) as lowercase hex: download checksums and prompt hashes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dsv4::eval {

std::string sha256_hex(std::string_view bytes);
// The digest of a file's bytes; nullopt when it cannot be read.
std::optional<std::string> sha256_file(const std::string& path);

}  // namespace dsv4::eval
