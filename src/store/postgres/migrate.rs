//! PostgreSQL's schema history: `migrations_postgres/`, run by refinery's tokio-postgres driver
//! under an advisory lock.
//!
//! The PostgreSQL schema has a refinery history of its own, beside SQLite's `migrations/` (a
//! sibling folder, since refinery walks a folder recursively): `V1__baseline.sql` is the SQLite
//! schema after its V12, and each later change is a migration in both folders
//! (`tests/it/postgres/parity.rs` compares the two schemas and fails when they drift).
//!
//! Several hosts may start at once against one database, and refinery takes no lock: two
//! runners would both find the history empty and both create the tables (one fails, or both
//! record the same version). [`migrate`] takes a session-level advisory lock first
//! (`pg_advisory_lock`, keyed by the schema being migrated), so one runner migrates while the
//! others wait and then find nothing left to do; the lock is released when it returns, and by
//! the server if the connection drops. The schema is the connection's `current_schema()` (the
//! first existing schema of its `search_path`): the tables, the functions and refinery's
//! `refinery_schema_history` all go there.

use tokio_postgres::Client;

use crate::error::{Error, Result};

mod embedded {
    refinery::embed_migrations!("migrations_postgres");
}

/// The first key of the migration lock (`pg_advisory_lock(key1, key2)`); the second is a hash
/// of the schema's name, so the migrations of two schemas of one database do not wait for each
/// other. ("tbmg": threadbase migrations.)
pub const LOCK_CLASS: i32 = 0x7462_6d67;

/// One migration this run applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub version: i32,
    pub name: String,
}

/// Brings the schema of `client`'s `current_schema()` up to date with `migrations_postgres/`,
/// holding the migration lock meanwhile; returns the migrations this call applied (none when
/// another host had already done it). An applied migration that was edited, or an applied
/// version this build does not know, is refused (as on SQLite).
pub async fn migrate(client: &mut Client) -> Result<Vec<Applied>> {
    let row = client
        .query_one(
            "SELECT current_schema(), current_setting('server_encoding')",
            &[],
        )
        .await?;
    let schema: Option<String> = row.get(0);
    let encoding: String = row.get(1);
    let Some(schema) = schema else {
        return Err(Error::io(
            "The PostgreSQL connection has no schema to create threadbase's tables in (no schema of its search_path exists). Repair: create the schema (CREATE SCHEMA name) or set the role's search_path to an existing one.",
        ));
    };
    if !encoding.eq_ignore_ascii_case("UTF8") {
        return Err(Error::io(format!(
            "The PostgreSQL database's encoding is {encoding}; threadbase stores UTF-8 text. Repair: use a database created with ENCODING 'UTF8'."
        )));
    }
    client
        .execute(
            "SELECT pg_advisory_lock($1, hashtext($2))",
            &[&LOCK_CLASS, &schema],
        )
        .await?;
    let run = embedded::migrations::runner()
        .set_abort_divergent(true)
        .set_abort_missing(true)
        .run_async(client)
        .await;
    let unlocked = client
        .execute(
            "SELECT pg_advisory_unlock($1, hashtext($2))",
            &[&LOCK_CLASS, &schema],
        )
        .await;
    let report = run?;
    unlocked?;
    Ok(report
        .applied_migrations()
        .iter()
        .map(|m| Applied {
            version: m.version(),
            name: m.name().to_owned(),
        })
        .collect())
}

/// The migrations of `migrations_postgres/` this build embeds, as (version, name), in order.
pub fn known() -> Vec<(i32, String)> {
    let mut all: Vec<(i32, String)> = embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| (m.version(), m.name().to_owned()))
        .collect();
    all.sort();
    all
}
