// Test-only: a real PostgreSQL server from Debian's package (postgresql-15), started for the
// tests of one binary and stopped when it exits. initdb makes a cluster in a fresh temporary
// directory; the server listens on a Unix socket in that directory only (no TCP port, so
// parallel test binaries never collide), with fsync off (a test's data need not survive a
// crash). Each test asks for a database of its own. Header-only, like core/test_temp_dir.h.
//
// PostgreSQL refuses to run as root: under root the cluster belongs to the `postgres` account
// the package made, and initdb, pg_ctl and the server run as it (setpriv from util-linux).
// The binaries are found with `pg_config --bindir` (libpq-dev), falling back to Debian's
// /usr/lib/postgresql/15/bin.
#ifndef EXPANSE_STORE_PG_TEST_SERVER_H_
#define EXPANSE_STORE_PG_TEST_SERVER_H_

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "core/subprocess.h"
#include "store/pg_connection.h"

namespace expanse::testing {

class PgTestServer {
 public:
  // The binary's server, started at the first call; a failure to start throws, which fails
  // the test that asked (never a skip: a test that needs PostgreSQL and has none has failed).
  static PgTestServer& Shared() {
    static PgTestServer server;
    return server;
  }

  // A new, empty database of its own: its connection string.
  std::string NewDatabase() {
    const std::string name = "t" + std::to_string(++databases_);
    auto admin = store::pg_internal::PgConnection::Open(ConnInfo("postgres"));
    if (!admin.ok())
      throw std::runtime_error("PostgreSQL test server: " + admin.status().message());
    const Status made = admin->ExecuteScript("CREATE DATABASE " + name);
    if (!made.ok())
      throw std::runtime_error("PostgreSQL test server: " + made.message());
    return ConnInfo(name);
  }

  // Stops the server (fast shutdown: every connection is cut) and starts it again, keeping its
  // databases: what a database restart looks like to the store.
  void Stop() { Run({Bin("pg_ctl"), "stop", "-D", dir_ + "/data", "-m", "fast", "-w"}, true); }
  void Start() {
    Run({Bin("pg_ctl"), "start", "-w", "-t", "60", "-D", dir_ + "/data", "-l", dir_ + "/log", "-o",
         "-c listen_addresses='' -k " + dir_ + " -p " + std::to_string(kPort) +
             " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"},
        true);
  }

  // The store tests' database: made and migrated by `open_store` at the first call, emptied
  // at each later one (every table but schema_migrations truncated, ids restarted), which
  // costs a few milliseconds where a new database and its migrations cost half a second.
  // The caller must have closed every connection of the previous test.
  template <typename OpenStore>
  std::string EmptiedStoreDatabase(OpenStore open_store) {
    if (store_database_.empty()) {
      store_database_ = NewDatabase();
      if (!open_store(store_database_))
        throw std::runtime_error("PostgreSQL test server: the store database did not open");
      return store_database_;
    }
    auto db = store::pg_internal::PgConnection::Open(store_database_);
    if (!db.ok())
      throw std::runtime_error("PostgreSQL test server: " + db.status().message());
    auto tables = db->Query(
        "SELECT string_agg(quote_ident(tablename), ', ') FROM pg_tables "
        "WHERE schemaname = current_schema() AND tablename <> 'schema_migrations'");
    if (!tables.ok() || !*tables->Step())
      throw std::runtime_error("PostgreSQL test server: listing the store's tables failed");
    const Status emptied =
        db->ExecuteScript("TRUNCATE " + tables->ColumnText(0) + " RESTART IDENTITY CASCADE");
    if (!emptied.ok())
      throw std::runtime_error("PostgreSQL test server: " + emptied.message());
    return store_database_;
  }

  std::string ConnInfo(const std::string& database) const {
    return "host=" + dir_ + " port=" + std::to_string(kPort) + " user=postgres dbname=" + database;
  }
  const std::string& directory() const { return dir_; }

  PgTestServer(const PgTestServer&) = delete;
  PgTestServer& operator=(const PgTestServer&) = delete;
  ~PgTestServer() {
    // Immediate: the tests are done with it and nothing of it is kept.
    Run({Bin("pg_ctl"), "stop", "-D", dir_ + "/data", "-m", "immediate", "-w"}, false);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // The socket's name is .s.PGSQL.<port>; with no TCP listener any number serves.
  static constexpr int kPort = 5432;

 private:
  PgTestServer() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/expanse-pg.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    dir_ = pattern;
    if (geteuid() == 0) {
      const passwd* pw = getpwnam("postgres");
      if (pw == nullptr)
        throw std::runtime_error(
            "PostgreSQL test server: no postgres account (scripts/setup "
            "installs Debian's postgresql package)");
      if (chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0)
        throw std::system_error(errno, std::generic_category(), "chown " + dir_);
      as_postgres_ = true;
    }
    std::string bindir = "/usr/lib/postgresql/15/bin";
    SubprocessOptions pg_config;
    pg_config.argv = {"pg_config", "--bindir"};
    auto config = RunSubprocess(pg_config);
    if (config.ok() && config->exit_code == 0 && !config->stdout_text.empty()) {
      bindir = config->stdout_text.substr(0, config->stdout_text.find('\n'));
    }
    bindir_ = bindir;
    Run({Bin("initdb"), "-D", dir_ + "/data", "-U", "postgres", "--auth=trust", "-E", "UTF8",
         "--locale=C", "--no-sync"},
        true);
    Run({Bin("pg_ctl"), "start", "-w", "-t", "60", "-D", dir_ + "/data", "-l", dir_ + "/log", "-o",
         "-c listen_addresses='' -k " + dir_ + " -p " + std::to_string(kPort) +
             " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"},
        true);
  }

  std::string Bin(const std::string& name) const { return bindir_ + "/" + name; }

  void Run(std::vector<std::string> argv, bool must) {
    if (as_postgres_) {
      argv.insert(argv.begin(), {"/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres",
                                 "--init-groups", "--"});
    }
    SubprocessOptions options;
    options.argv = argv;
    options.timeout = std::chrono::seconds(90);
    auto ran = RunSubprocess(options);
    if (!must)
      return;
    if (!ran.ok())
      throw std::runtime_error("PostgreSQL test server: " + argv.front() + ": " +
                               ran.status().message());
    if (ran->exit_code != 0) {
      throw std::runtime_error("PostgreSQL test server: " + argv[as_postgres_ ? 5 : 0] +
                               " failed: " + ran->stderr_text + ran->stdout_text);
    }
  }

  std::string dir_;
  std::string bindir_;
  bool as_postgres_ = false;
  int databases_ = 0;
  std::string store_database_;  // EmptiedStoreDatabase's
};

}  // namespace expanse::testing

#endif  // EXPANSE_STORE_PG_TEST_SERVER_H_
