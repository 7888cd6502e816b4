//! Helpers shared by the integration tests: temporary databases and seeded trees
//! (`common`), a `threadbase serve` client (`serve_client`), the loopback fake LLM and real
//! Pi's environment (`fake_llm`) and what a serve must not inherit (`serve_env`), a real
//! `pi --mode rpc` child (`pi_child`), database
//! invariants (`db_check`), the property tests' configuration and path order (`prop`),
//! their random trees of threads (`tree`), a runtime over a temporary database (`runtime`) and
//! a schema of its own on the test PostgreSQL server (`postgres`), and a test's own SQL on
//! either backend (`sql`).

pub mod browser;
pub mod common;
pub mod db_check;
pub mod extension_driver;
pub mod fake_llm;
pub mod pi_child;
pub mod postgres;
pub mod prop;
pub mod runtime;
pub mod serve_client;
pub mod serve_env;
pub mod sql;
pub mod tree;

/// Whether the test database `db` is a SQLite file (not a PostgreSQL URL).
pub fn database_is_sqlite(db: &std::path::Path) -> bool {
    threadbase::store::database_url(db).is_none()
}
