// ECDSA P-256 signing and verification, including interoperability with the real `openssl`
// command in both directions (cosign writes and reads the same bytes).
#include "crypto/ecdsa.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/subprocess.h"

namespace expanse::crypto {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using namespace std::string_literals;

constexpr std::string_view kData = "expanse-daemon_1.2.0_linux_amd64.tar.gz contents\n";

class EcdsaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
                          "/expanse_ecdsa_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto pair = GenerateSigningKey();
    ASSERT_TRUE(pair.ok()) << pair.status();
    keys_ = *pair;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  void WriteFile(const std::string& name, std::string_view contents) const {
    std::ofstream out(Path(name), std::ios::binary);
    out << contents;
  }

  std::string ReadFile(const std::string& name) const {
    std::ifstream in(Path(name), std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  }

  // Runs the openssl command; returns its exit code (or -1) and fills `output`.
  int OpenSsl(std::vector<std::string> args, std::string* output = nullptr) const {
    args.insert(args.begin(), "openssl");
    SubprocessOptions options;
    options.argv = args;
    options.timeout = std::chrono::seconds(60);
    Result<SubprocessResult> run = RunSubprocess(options);
    EXPECT_TRUE(run.ok()) << run.status();
    if (!run.ok()) {
      return -1;
    }
    if (output != nullptr) {
      *output = run->stdout_text + run->stderr_text;
    }
    return run->exit_code.value_or(-1);
  }

  std::string OpenSslKey(const std::vector<std::string>& genpkey_args) const {
    std::vector<std::string> args = {"genpkey", "-out", Path("openssl_key.pem")};
    args.insert(args.end(), genpkey_args.begin(), genpkey_args.end());
    EXPECT_EQ(OpenSsl(args), 0);
    return ReadFile("openssl_key.pem");
  }

  std::string dir_;
  SigningKeyPair keys_;
};

TEST_F(EcdsaTest, GeneratesPemKeysThatSignAndVerify) {
  EXPECT_THAT(keys_.private_key_pem, StartsWith("-----BEGIN PRIVATE KEY-----\n"));
  EXPECT_THAT(keys_.public_key_pem, StartsWith("-----BEGIN PUBLIC KEY-----\n"));
  auto signature = SignBlob(keys_.private_key_pem, kData);
  ASSERT_TRUE(signature.ok()) << signature.status();
  EXPECT_THAT(*signature, Not(HasSubstr("\n")));
  EXPECT_TRUE(VerifyBlob(keys_.public_key_pem, kData, *signature).ok());
  EXPECT_EQ(PublicKeyOf(keys_.private_key_pem).value(), keys_.public_key_pem);

  auto other = GenerateSigningKey();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->private_key_pem, keys_.private_key_pem);
}

TEST_F(EcdsaTest, OpenSslVerifiesOurSignature) {
  auto signature = SignBlob(keys_.private_key_pem, kData);
  ASSERT_TRUE(signature.ok()) << signature.status();
  WriteFile("pub.pem", keys_.public_key_pem);
  WriteFile("data", kData);
  WriteFile("sig.der", Base64Decode(*signature).value());
  std::string output;
  EXPECT_EQ(OpenSsl({"dgst", "-sha256", "-verify", Path("pub.pem"), "-signature", Path("sig.der"),
                     Path("data")},
                    &output),
            0)
      << output;
  EXPECT_THAT(output, HasSubstr("Verified OK"));

  // The same check refuses other bytes, so the success above means something.
  WriteFile("data", std::string(kData) + "x");
  EXPECT_NE(OpenSsl({"dgst", "-sha256", "-verify", Path("pub.pem"), "-signature", Path("sig.der"),
                     Path("data")}),
            0);
}

TEST_F(EcdsaTest, WeVerifyAndSignWithOpenSslMadeKeys) {
  std::string private_pem = OpenSslKey({"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"});
  ASSERT_EQ(OpenSsl({"pkey", "-in", Path("openssl_key.pem"), "-pubout", "-out", Path("pub.pem")}),
            0);
  WriteFile("data", kData);
  ASSERT_EQ(OpenSsl({"dgst", "-sha256", "-sign", Path("openssl_key.pem"), "-out", Path("sig.der"),
                     Path("data")}),
            0);
  std::string public_pem = ReadFile("pub.pem");
  std::string signature = Base64Encode(ReadFile("sig.der"));
  EXPECT_TRUE(VerifyBlob(public_pem, kData, signature).ok());
  // A .sig file as cosign or `base64` writes it, with a trailing newline.
  EXPECT_TRUE(VerifyBlob(public_pem, kData, signature + "\n").ok());
  EXPECT_TRUE(VerifyBlob(public_pem, kData, " \t" + signature + "\r\n").ok());

  // Our signer reads OpenSSL's PKCS#8 key and the older SEC 1 form.
  auto ours = SignBlob(private_pem, kData);
  ASSERT_TRUE(ours.ok()) << ours.status();
  EXPECT_TRUE(VerifyBlob(public_pem, kData, *ours).ok());
  ASSERT_EQ(OpenSsl({"ec", "-in", Path("openssl_key.pem"), "-out", Path("sec1.pem")}), 0);
  std::string sec1 = ReadFile("sec1.pem");
  ASSERT_THAT(sec1, StartsWith("-----BEGIN EC PRIVATE KEY-----"));
  auto from_sec1 = SignBlob(sec1, kData);
  ASSERT_TRUE(from_sec1.ok()) << from_sec1.status();
  EXPECT_TRUE(VerifyBlob(public_pem, kData, *from_sec1).ok());
}

TEST_F(EcdsaTest, TamperedDataIsAMismatch) {
  std::string signature = SignBlob(keys_.private_key_pem, kData).value();
  std::string tampered(kData);
  tampered[3] ^= 1;
  Status status = VerifyBlob(keys_.public_key_pem, tampered, signature);
  EXPECT_EQ(status.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(status.reason(), "signature_mismatch");
  EXPECT_EQ(VerifyBlob(keys_.public_key_pem, "", signature).reason(), "signature_mismatch");
}

TEST_F(EcdsaTest, AnotherKeysSignatureIsAMismatch) {
  SigningKeyPair other = GenerateSigningKey().value();
  std::string signature = SignBlob(other.private_key_pem, kData).value();
  EXPECT_EQ(VerifyBlob(keys_.public_key_pem, kData, signature).reason(), "signature_mismatch");
  EXPECT_TRUE(VerifyBlob(other.public_key_pem, kData, signature).ok());
}

TEST_F(EcdsaTest, TruncatedOrGarbledSignaturesAreMalformed) {
  std::string der = Base64Decode(SignBlob(keys_.private_key_pem, kData).value()).value();
  auto reason_for = [&](std::string_view signature) {
    return VerifyBlob(keys_.public_key_pem, kData, signature).reason();
  };
  EXPECT_EQ(reason_for(Base64Encode(der.substr(0, der.size() - 1))), "signature_malformed");
  EXPECT_EQ(reason_for(Base64Encode(der.substr(0, 10))), "signature_malformed");
  EXPECT_EQ(reason_for(Base64Encode(der + "\0"s)), "signature_malformed");  // trailing byte
  std::string text = Base64Encode(der);
  EXPECT_EQ(reason_for(text.substr(0, text.size() - 3)), "signature_malformed");  // bad base64
  EXPECT_EQ(reason_for("not base64 at all!"), "signature_malformed");
  EXPECT_EQ(reason_for(""), "signature_malformed");
  EXPECT_EQ(reason_for("\n"), "signature_malformed");
  EXPECT_EQ(reason_for(std::string(4096, 'A')), "signature_malformed");
  EXPECT_EQ(reason_for(Base64Encode("0123456789")), "signature_malformed");
  Status status = VerifyBlob(keys_.public_key_pem, kData, "not base64 at all!");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), Not(HasSubstr("not base64 at all")));
}

TEST_F(EcdsaTest, GarbageKeysAreInvalid) {
  std::string signature = SignBlob(keys_.private_key_pem, kData).value();
  for (std::string_view garbage : {std::string_view(""), std::string_view("not a key"),
                                   std::string_view("-----BEGIN PUBLIC KEY-----\nAAAA\n"
                                                    "-----END PUBLIC KEY-----\n")}) {
    Status status = VerifyBlob(garbage, kData, signature);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << garbage;
    EXPECT_EQ(status.reason(), "key_invalid") << garbage;
    EXPECT_EQ(SignBlob(garbage, kData).status().reason(), "key_invalid") << garbage;
  }
  // Keys of the wrong kind for the operation.
  EXPECT_EQ(VerifyBlob(keys_.private_key_pem, kData, signature).reason(), "key_invalid");
  EXPECT_EQ(SignBlob(keys_.public_key_pem, kData).status().reason(), "key_invalid");
}

TEST_F(EcdsaTest, RsaAndOtherCurvesAreRefused) {
  std::string rsa = OpenSslKey({"-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"});
  ASSERT_EQ(OpenSsl({"pkey", "-in", Path("openssl_key.pem"), "-pubout", "-out", Path("rsa.pub")}),
            0);
  Status status =
      VerifyBlob(ReadFile("rsa.pub"), kData, SignBlob(keys_.private_key_pem, kData).value());
  EXPECT_EQ(status.reason(), "key_invalid");
  EXPECT_THAT(status.message(), HasSubstr("RSA"));
  EXPECT_EQ(SignBlob(rsa, kData).status().reason(), "key_invalid");

  std::string p384 = OpenSslKey({"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"});
  Result<std::string> signed_p384 = SignBlob(p384, kData);
  EXPECT_EQ(signed_p384.status().reason(), "key_invalid");
  EXPECT_THAT(signed_p384.status().message(), HasSubstr("secp384r1"));
}

TEST_F(EcdsaTest, EncryptedPrivateKeyIsRefusedWithoutPrompting) {
  WriteFile("plain.pem", keys_.private_key_pem);
  ASSERT_EQ(OpenSsl({"pkcs8", "-topk8", "-in", Path("plain.pem"), "-out", Path("enc.pem"),
                     "-passout", "pass:secret-pass"}),
            0);
  std::string encrypted = ReadFile("enc.pem");
  ASSERT_THAT(encrypted, StartsWith("-----BEGIN ENCRYPTED PRIVATE KEY-----"));
  Result<std::string> signature = SignBlob(encrypted, kData);
  EXPECT_EQ(signature.status().reason(), "key_invalid");
  EXPECT_THAT(signature.status().message(), HasSubstr("encrypted"));
}

TEST(Base64Test, StandardAlphabetWithPadding) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("\xfb\xff"), "+/8=");
  EXPECT_EQ(Base64Decode("+/8=").value(), "\xfb\xff");
  EXPECT_FALSE(Base64Decode("Zg").ok());    // padding required
  EXPECT_FALSE(Base64Decode("Zh==").ok());  // non-zero unused bits
  EXPECT_FALSE(Base64Decode("-_8=").ok());  // base64url alphabet
  EXPECT_FALSE(Base64Decode("Zg==\n").ok());
}

}  // namespace
}  // namespace expanse::crypto
