// Test-only helpers shared by the sqlite_store_*_test.cc files: a temporary directory, a
// fixture that opens a fresh store on a file or in memory, and builders for the rows most
// tests need.
#ifndef EXPANSE_STORE_SQLITE_STORE_TEST_UTIL_H_
#define EXPANSE_STORE_SQLITE_STORE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "core/test_temp_dir.h"
#include "store/pg_store.h"
#include "store/pg_test_server.h"
#include "store/sqlite_store.h"
#include "store/store.h"

namespace expanse::store::store_testing {

// Text that has broken naive SQL quoting, shell quoting or UTF-8 handling somewhere: quotes,
// comment and statement terminators, LIKE/GLOB wildcards, a backslash, control characters,
// a right-to-left override, a combining mark, an emoji and a non-BMP letter. No NUL.
inline const std::string kOddText =
    "Robert'); DROP TABLE users;-- \"q\" `b` \\ %_*?[] \t\r\n "
    "\xE2\x80\xAE"       // U+202E RIGHT-TO-LEFT OVERRIDE
    "e\xCC\x81 "         // e + U+0301 COMBINING ACUTE ACCENT
    "\xF0\x9F\x9A\x80 "  // U+1F680 ROCKET
    "\xF0\x90\x8D\x88 "  // U+10348 GOTHIC LETTER HWAIR
    "\xEF\xBB\xBF end";  // U+FEFF BYTE ORDER MARK

// 2023-11-14T22:13:20Z: a round, recognisable "now" for tests.
inline constexpr int64_t kNow = 1'700'000'000'000;
inline constexpr int64_t kHour = 3'600'000;

using TempDir = ::expanse::testing::TempDir;

// The store's engines: SQLite on a file and in memory, and a real PostgreSQL server started
// for the test binary (pg_test_server.h), its store database emptied for each test.
enum class Backing { kFile, kMemory, kPostgres };

inline const char* BackingText(Backing backing) {
  switch (backing) {
    case Backing::kFile:
      return "File";
    case Backing::kMemory:
      return "Memory";
    case Backing::kPostgres:
      return "Postgres";
  }
  return "?";
}

// Readable test names and parameters in GoogleTest output ("File", not a byte dump).
inline void PrintTo(Backing backing, std::ostream* out) { *out << BackingText(backing); }

inline std::string BackingName(const ::testing::TestParamInfo<Backing>& info) {
  return BackingText(info.param);
}

// Instantiate with INSTANTIATE_TEST_SUITE_P(Backings, <Suite>, kBackings, BackingName).
inline const auto kBackings =
    ::testing::Values(Backing::kFile, Backing::kMemory, Backing::kPostgres);

// Each test gets a new, empty, migrated store.
class SqliteStoreTest : public ::testing::TestWithParam<Backing> {
 protected:
  void SetUp() override {
    if (GetParam() == Backing::kPostgres) {
      postgres_ = ::expanse::testing::PgTestServer::Shared().EmptiedStoreDatabase(
          [](const std::string& conninfo) { return OpenPostgresStore(conninfo).ok(); });
    }
    Result<std::unique_ptr<Store>> opened = OpenAnother();
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(opened).value();
  }

  // Another store on the test's database, as another server process would open it (an
  // in-memory SQLite database is private to its connection: a new, empty one).
  Result<std::unique_ptr<Store>> OpenAnother() const {
    if (GetParam() == Backing::kPostgres)
      return OpenPostgresStore(postgres_);
    SqliteStoreOptions options;
    options.path = GetParam() == Backing::kFile ? db_path() : ":memory:";
    return OpenSqliteStore(options);
  }

  std::string db_path() const { return dir_.path() + "/store.db"; }
  // The test's PostgreSQL database as a libpq URI (Backing::kPostgres only).
  const std::string& postgres_conninfo() const { return postgres_; }
  Store& store() { return *store_; }

  Organization MakeOrganization(const std::string& slug = "acme") {
    Result<Organization> organization = store_->CreateOrganization(slug, "Acme Corp", kNow);
    EXPECT_TRUE(organization.ok()) << organization.status();
    return organization.ok() ? *organization : Organization{};
  }

  User MakeUser(const std::string& email = "alice@example.com") {
    Result<User> user = store_->CreateUser(email, "Alice", "$argon2id$hash", kNow);
    EXPECT_TRUE(user.ok()) << user.status();
    return user.ok() ? *user : User{};
  }

  // A registered compute of `org_id`; with org_id 0 a new organisation is made for it.
  Compute MakeCompute(const std::string& id = "cmp_a", int64_t org_id = 0) {
    Compute compute;
    compute.id = id;
    compute.org_id = org_id != 0 ? org_id : MakeOrganization("org-of-" + SlugPart(id)).id;
    compute.name = "cluster " + id;
    compute.type = "slurm";
    compute.created_at_ms = kNow;
    compute.created_by_user = 1;
    compute.pinned_daemon_version = "0.1.0";
    compute.control_plane_url = "https://expanse.example.com";
    compute.data_plane_url = "https://data.expanse.example.com";
    Result<Compute> created = store_->CreateCompute(compute);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? *created : Compute{};
  }

  static InstallToken TokenFor(const std::string& compute_id, const std::string& hash,
                               int64_t created_at_ms = kNow) {
    InstallToken token;
    token.compute_id = compute_id;
    token.token_hash = hash;
    token.created_at_ms = created_at_ms;
    token.expires_at_ms = created_at_ms + kHour;
    token.created_by_user = 1;
    return token;
  }

  InstallToken IssueToken(const std::string& compute_id, const std::string& hash,
                          int64_t created_at_ms = kNow) {
    Result<InstallToken> token =
        store_->IssueInstallToken(TokenFor(compute_id, hash, created_at_ms));
    EXPECT_TRUE(token.ok()) << token.status();
    return token.ok() ? *token : InstallToken{};
  }

  static Credential CredentialWithSecret(const std::string& secret_hash) {
    Credential credential;
    credential.secret_hash = secret_hash;
    credential.hostname = "ctl01.cluster.internal";
    credential.daemon_version = "0.1.0";
    credential.slurm_version = "22.05.8";
    credential.role = "controller";
    return credential;
  }

  // Issues a token for `compute_id` and exchanges it at kNow.
  Credential Enroll(const std::string& compute_id, const std::string& secret_hash) {
    IssueToken(compute_id, "token-for-" + secret_hash);
    Result<Credential> credential = store_->ExchangeInstallToken(
        "token-for-" + secret_hash, CredentialWithSecret(secret_hash), kNow);
    EXPECT_TRUE(credential.ok()) << credential.status();
    return credential.ok() ? *credential : Credential{};
  }

  static Heartbeat HeartbeatOf(const Credential& credential, int64_t received_at_ms) {
    Heartbeat heartbeat;
    heartbeat.compute_id = credential.compute_id;
    heartbeat.credential_id = credential.id;
    heartbeat.received_at_ms = received_at_ms;
    heartbeat.controller_host = "ctl01";
    heartbeat.daemon_version = "0.1.0";
    heartbeat.body_json = R"({"v":1})";
    return heartbeat;
  }

 private:
  static std::string SlugPart(const std::string& id) {
    std::string slug;
    for (const char c : id) {
      slug += (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '-';
    }
    return slug.substr(0, 40);
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  std::string postgres_;  // the test's PostgreSQL database (Backing::kPostgres)
};

}  // namespace expanse::store::store_testing

#endif  // EXPANSE_STORE_SQLITE_STORE_TEST_UTIL_H_
