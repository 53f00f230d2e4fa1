// ControlPlane against a real SQLite store and a manual clock.
#include "server/control_plane.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "store/sqlite_store.h"

namespace expanse::server {
namespace control_plane_test {
namespace {

constexpr int64_t kStart = 1'800'000'000'000;
constexpr char kHeartbeat[] = R"({"version":1,"daemon_version":"0.1.0","controller_host":"ctl"})";

class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = store::OpenSqliteStore({.path = ":memory:"});
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
    ControlPlaneOptions options;
    options.password_cost = crypto::MinimumCost();
    options.control_plane_url = "https://cp.example:8443";
    options.data_plane_url = "https://dp.example:8444";
    options.daemon_version = "0.1.0";
    cp_ = std::make_unique<ControlPlane>(*store_, clock_, options);
    auto boot = cp_->Bootstrap("acme", "Acme Research", "owner@acme.example", "pw-owner-1", "ci");
    ASSERT_TRUE(boot.ok()) << boot.status();
    owner_token_ = boot->api_token;
    auto p = cp_->AuthenticateApiToken(owner_token_);
    ASSERT_TRUE(p.ok()) << p.status();
    owner_ = *p;
  }

  store::Compute NewCompute() {
    auto c = cp_->CreateCompute(owner_, "acme", "gpu-cluster", "slurm");
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }

  std::string IssueToken(const std::string& compute_id) {
    auto t = cp_->IssueInstallToken(owner_, compute_id, "127.0.0.1");
    EXPECT_TRUE(t.ok()) << t.status();
    return t->token;
  }

  Result<ControlPlane::Enrolment> Exchange(const std::string& token) {
    return cp_->ExchangeInstallToken(token, {"ctl", "0.1.0", "22.05.8", "controller"}, "10.0.0.5");
  }

  Principal SessionOf(const std::string& email, const std::string& password) {
    auto login = cp_->Login(email, password, "10.0.0.9");
    EXPECT_TRUE(login.ok()) << login.status();
    auto p = cp_->AuthenticateSession(login->session_cookie, login->csrf_token, true);
    EXPECT_TRUE(p.ok()) << p.status();
    return *p;
  }

  ManualClock clock_{kStart};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ControlPlane> cp_;
  std::string owner_token_;
  Principal owner_;
};

// An organisation's computes are bounded by what its job lists and rollups may name.
TEST_F(ControlPlaneTest, AnOrganisationHasAtMostAsManyComputesAsItsListsName) {
  for (size_t i = 0; i < kMaxComputesPerOrganization; ++i)
    ASSERT_TRUE(cp_->CreateCompute(owner_, "acme", "c", "slurm").ok()) << i;
  auto refused = cp_->CreateCompute(owner_, "acme", "one too many", "slurm");
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(refused.status().reason(), "too_many_computes");
  EXPECT_EQ(cp_->ListComputes(owner_, "acme")->size(), kMaxComputesPerOrganization);
}

TEST_F(ControlPlaneTest, NewComputeCarriesThePlanesAndPinnedVersion) {
  store::Compute c = NewCompute();
  EXPECT_EQ(c.id.rfind("cmp_", 0), 0u);
  EXPECT_EQ(c.state, store::ComputeState::kRegistered);
  EXPECT_EQ(c.control_plane_url, "https://cp.example:8443");
  EXPECT_EQ(c.data_plane_url, "https://dp.example:8444");
  EXPECT_EQ(c.pinned_daemon_version, "0.1.0");
}

TEST_F(ControlPlaneTest, RegisteringAComputeNeedsTheExplicitPermission) {
  ASSERT_TRUE(
      cp_->AddUser("acme", "viewer@acme.example", "pw-v", store::Role::kViewer, false).ok());
  ASSERT_TRUE(
      cp_->AddUser("acme", "member@acme.example", "pw-m", store::Role::kMember, false).ok());
  ASSERT_TRUE(cp_->AddUser("acme", "reg@acme.example", "pw-r", store::Role::kMember, true).ok());
  for (const auto& [email, pw] :
       {std::pair{"viewer@acme.example", "pw-v"}, std::pair{"member@acme.example", "pw-m"}}) {
    auto c = cp_->CreateCompute(SessionOf(email, pw), "acme", "x", "slurm");
    ASSERT_FALSE(c.ok()) << email;
    EXPECT_EQ(c.status().reason(), "forbidden") << email;
  }
  EXPECT_TRUE(cp_->CreateCompute(SessionOf("reg@acme.example", "pw-r"), "acme", "x", "slurm").ok());
}

TEST_F(ControlPlaneTest, OtherOrganisationsLookAbsent) {
  auto other = cp_->Bootstrap("other", "Other Lab", "boss@other.example", "pw-other", "t");
  ASSERT_TRUE(other.ok()) << other.status();
  Principal outsider = *cp_->AuthenticateApiToken(other->api_token);
  store::Compute c = NewCompute();
  EXPECT_EQ(cp_->GetCompute(outsider, c.id).status().reason(), "not_found");
  EXPECT_EQ(cp_->IssueInstallToken(outsider, c.id, "").status().reason(), "not_found");
  EXPECT_EQ(cp_->CreateCompute(outsider, "acme", "x", "slurm").status().reason(), "not_found");
  EXPECT_EQ(cp_->Deprovision(outsider, c.id, "").reason(), "not_found");
}

TEST_F(ControlPlaneTest, IntrospectionNamesOrganisationAndComputeWithoutConsuming) {
  store::Compute c = NewCompute();
  std::string token = IssueToken(c.id);
  for (int i = 0; i < 2; ++i) {
    auto intro = cp_->IntrospectInstallToken(token, "");
    ASSERT_TRUE(intro.ok()) << intro.status();
    EXPECT_EQ(intro->org.slug, "acme");
    EXPECT_EQ(intro->compute.id, c.id);
    EXPECT_EQ(intro->expires_at_ms, kStart + 60 * 60 * 1000);
  }
  EXPECT_TRUE(Exchange(token).ok());
}

TEST_F(ControlPlaneTest, TokensAreSingleUseShortLivedAndReplacedByReissue) {
  store::Compute c = NewCompute();
  std::string first = IssueToken(c.id);
  std::string second = IssueToken(c.id);
  EXPECT_EQ(Exchange(first).status().reason(), "install_token_replaced");
  ASSERT_TRUE(Exchange(second).ok());
  EXPECT_EQ(Exchange(second).status().reason(), "install_token_used");
  EXPECT_EQ(Exchange("exp_it_nonsense").status().reason(), "install_token_invalid");
  EXPECT_EQ(Exchange("not-a-token").status().reason(), "install_token_invalid");

  std::string late = IssueToken(c.id);
  clock_.Advance(60 * 60 * 1000);
  EXPECT_EQ(cp_->IntrospectInstallToken(late, "").status().reason(), "install_token_expired");
  EXPECT_EQ(Exchange(late).status().reason(), "install_token_expired");
}

TEST_F(ControlPlaneTest, ExchangingAReissuedTokenRevokesThePreviousCredential) {
  store::Compute c = NewCompute();
  auto first = Exchange(IssueToken(c.id));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->credential.rfind("exp_cc_", 0), 0u);
  auto id = cp_->AuthenticateCredential(first->credential);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->compute.id, c.id);

  auto second = Exchange(IssueToken(c.id));
  ASSERT_TRUE(second.ok()) << second.status();
  auto old = cp_->AuthenticateCredential(first->credential);
  EXPECT_EQ(old.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(old.status().reason(), "credential_revoked");
  EXPECT_TRUE(cp_->AuthenticateCredential(second->credential).ok());
  EXPECT_EQ(cp_->AuthenticateCredential("exp_cc_forged").status().reason(), "credential_invalid");
}

TEST_F(ControlPlaneTest, FirstHeartbeatEnrolsAndActivates) {
  store::Compute c = NewCompute();
  auto enrolled = Exchange(IssueToken(c.id));
  ASSERT_TRUE(enrolled.ok());
  auto id = *cp_->AuthenticateCredential(enrolled->credential);
  EXPECT_FALSE(*cp_->WaitForEnrolment(id, 0));
  EXPECT_EQ(cp_->RecordHeartbeat(id, "{").reason(), "invalid_json");
  EXPECT_EQ(cp_->RecordHeartbeat(id, R"({"version":2})").reason(), "invalid_heartbeat");
  ASSERT_TRUE(cp_->RecordHeartbeat(id, kHeartbeat).ok());
  EXPECT_TRUE(*cp_->WaitForEnrolment(id, 0));
  auto now = cp_->GetCompute(owner_, c.id);
  EXPECT_EQ(now->state, store::ComputeState::kActive);
  EXPECT_EQ(now->controller_host, "ctl");
  EXPECT_EQ(now->last_heartbeat_ms, kStart);

  clock_.Advance(cp_->options().stale_after_ms + 1);
  EXPECT_EQ(*cp_->MarkStaleComputes(), 1);
  EXPECT_EQ(cp_->GetCompute(owner_, c.id)->state, store::ComputeState::kStale);
  ASSERT_TRUE(cp_->RecordHeartbeat(id, kHeartbeat).ok());
  EXPECT_EQ(cp_->GetCompute(owner_, c.id)->state, store::ComputeState::kActive);
}

TEST_F(ControlPlaneTest, DeprovisionRevokesCredentialsAndTokensButKeepsHistory) {
  store::Compute c = NewCompute();
  auto enrolled = Exchange(IssueToken(c.id));
  auto id = *cp_->AuthenticateCredential(enrolled->credential);
  ASSERT_TRUE(cp_->RecordHeartbeat(id, kHeartbeat).ok());
  std::string pending = IssueToken(c.id);
  ASSERT_TRUE(cp_->Deprovision(id, "10.0.0.5").ok());
  EXPECT_EQ(cp_->AuthenticateCredential(enrolled->credential).status().reason(),
            "credential_revoked");
  EXPECT_FALSE(Exchange(pending).ok());
  EXPECT_EQ(cp_->IssueInstallToken(owner_, c.id, "").status().reason(), "compute_deprovisioned");
  EXPECT_EQ(cp_->GetCompute(owner_, c.id)->state, store::ComputeState::kDeprovisioned);
  EXPECT_TRUE(store_->LatestHeartbeat(c.id).ok());
}

TEST_F(ControlPlaneTest, LoginSessionsAndCsrf) {
  auto bad = cp_->Login("owner@acme.example", "wrong", "10.0.0.7");
  EXPECT_EQ(bad.status().reason(), "login_failed");
  EXPECT_EQ(cp_->Login("nobody@acme.example", "x", "").status().reason(), "login_failed");
  auto ok = cp_->Login("OWNER@acme.example", "pw-owner-1", "10.0.0.7");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(cp_->AuthenticateSession(ok->session_cookie, "", false).ok());
  EXPECT_EQ(cp_->AuthenticateSession(ok->session_cookie, "", true).status().reason(),
            "csrf_failed");
  EXPECT_EQ(cp_->AuthenticateSession(ok->session_cookie, "wrong", true).status().reason(),
            "csrf_failed");
  EXPECT_TRUE(cp_->AuthenticateSession(ok->session_cookie, ok->csrf_token, true).ok());
  clock_.Advance(cp_->options().session_ttl_ms);
  EXPECT_EQ(cp_->AuthenticateSession(ok->session_cookie, "", false).status().reason(),
            "session_expired");
}

TEST_F(ControlPlaneTest, SecurityEventsAreAudited) {
  store::Compute c = NewCompute();
  std::string token = IssueToken(c.id);
  ASSERT_TRUE(cp_->IntrospectInstallToken(token, "").ok());
  ASSERT_TRUE(Exchange(token).ok());
  EXPECT_FALSE(Exchange(token).ok());
  EXPECT_FALSE(cp_->Login("owner@acme.example", "wrong", "10.9.9.9").ok());
  auto events = cp_->Audit(owner_, "acme", 100);
  ASSERT_TRUE(events.ok()) << events.status();
  std::string actions;
  for (const auto& e : *events)
    actions = e.action + " " + actions;  // oldest first
  for (const char* want : {"install_token.issued", "install_token.introspected",
                           "install_token.exchanged", "install_token.refused"}) {
    EXPECT_NE(actions.find(want), std::string::npos) << want << " missing in: " << actions;
  }
  // A known user's failed sign-in is shown to the admins of the user's organisation.
  bool failed_login = false;
  for (const auto& e : *events)
    failed_login |= e.action == "login.failed" && e.remote_addr == "10.9.9.9";
  EXPECT_TRUE(failed_login);
}

TEST_F(ControlPlaneTest, BadInputIsRefusedWithTheField) {
  auto c = cp_->CreateCompute(owner_, "acme", std::string("bad\x01name"), "slurm");
  EXPECT_EQ(c.status().reason(), "invalid_argument");
  EXPECT_NE(c.status().message().find("compute name"), std::string::npos);
  EXPECT_EQ(cp_->CreateCompute(owner_, "acme", "\xff\xfe", "slurm").status().reason(),
            "invalid_argument");
  EXPECT_EQ(cp_->CreateCompute(owner_, "acme", "x", "kubernetes").status().reason(),
            "invalid_argument");
  store::Compute ok = NewCompute();
  auto e =
      cp_->ExchangeInstallToken(IssueToken(ok.id), {"bad host!", "0.1.0", "", "controller"}, "");
  EXPECT_EQ(e.status().reason(), "invalid_argument");
}

}  // namespace
}  // namespace control_plane_test
}  // namespace expanse::server
