#include "release/embedded_key.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "crypto/ecdsa.h"

namespace expanse::release {
namespace embedded_key_test {
namespace {

TEST(EmbeddedKeyTest, IsAP256PublicKeyPem) {
  std::string_view pem = EmbeddedReleasePublicKey();
  EXPECT_TRUE(pem.starts_with("-----BEGIN PUBLIC KEY-----\n"));
  EXPECT_TRUE(pem.ends_with("-----END PUBLIC KEY-----\n"));
  // A well-formed signature by another key is a mismatch, not key_invalid: the key loads.
  crypto::SigningKeyPair other = crypto::GenerateSigningKey().value();
  Status status =
      crypto::VerifyBlob(pem, "data", crypto::SignBlob(other.private_key_pem, "data").value());
  EXPECT_EQ(status.reason(), "signature_mismatch");
}

}  // namespace
}  // namespace embedded_key_test
}  // namespace expanse::release
