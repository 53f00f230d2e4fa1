// Internal to the store module: the versioned schema of the store, on SQLite and on PostgreSQL
// (one version number for both), and the code that brings a database up to it.
// docs/formats/store-sqlite.md describes the schema and how to add a migration.
#ifndef EXPANSE_STORE_MIGRATIONS_H_
#define EXPANSE_STORE_MIGRATIONS_H_

#include <span>
#include <string_view>

#include "core/result.h"
#include "core/status.h"
#include "store/sql_connection.h"

namespace expanse::store::sqlite_internal {

struct Migration {
  int version = 0;             // 1, 2, 3, ... without gaps; recorded in schema_migrations
  const char* sql{};           // constant DDL, run as one script inside the migration's transaction
  const char* postgres_sql{};  // the same version on PostgreSQL (pg_migrations.cc)
};

// Every migration this binary knows, oldest first. Append only: a released migration is
// never edited, because databases in the field already ran it.
std::span<const Migration> Migrations();

// The version the newest migration brings a database to.
int LatestSchemaVersion();

// The highest version recorded in schema_migrations; 0 for a database without it.
Result<int> SchemaVersion(Connection& db);

// Applies, each in its own BEGIN IMMEDIATE transaction, the migrations newer than the
// database. Safe when several processes open one database at once: the version is read
// again inside each transaction. Fails with kFailedPrecondition, leaving the database
// untouched, when it is newer than LatestSchemaVersion().
Status ApplyMigrations(Connection& db);

}  // namespace expanse::store::sqlite_internal

#endif  // EXPANSE_STORE_MIGRATIONS_H_
