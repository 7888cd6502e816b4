//! The PostgreSQL backend's groundwork against a real server (`THREADBASE_TEST_PG`, see
//! `support/postgres.rs`): its migrations and their lock (`migrate`), the schema's parity with
//! SQLite's (`parity`), every query of `sql/` prepared on it (`queries`), a server outage
//! while a serve runs (`outage`, on a cluster of its own), a local server reached over its
//! Unix socket (`socket`), and a serve whose row watcher cannot get a connection, and the
//! connections a serve holds at rest (`supervision`, as roles with a CONNECTION LIMIT). Each test skips
//! without a server, and fails without one under `CI=true`.

mod deadlock;
mod migrate;
mod outage;
mod parity;
mod queries;
mod socket;
mod suite;
mod supervision;
