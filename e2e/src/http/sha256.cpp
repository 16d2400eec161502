// SHA-256 digests through OpenSSL's EVP interface.
#include "http/sha256.hpp"

#include <openssl/evp.h>

#include <fstream>
#include <memory>

namespace dsv4::eval {
namespace {

std::string to_hex(const unsigned char* md, unsigned len) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  return to_hex(md, len);
}

std::optional<std::string> sha256_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  char buf[1 << 16];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) {
    EVP_DigestUpdate(ctx.get(), buf, size_t(f.gcount()));
    if (f.eof()) break;
  }
  if (f.bad()) return std::nullopt;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  return to_hex(md, len);
}

}  // namespace dsv4::eval
