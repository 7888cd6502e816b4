//! `store::postgres::migrate`: a fresh schema gets `migrations_postgres/`, a second run finds
//! nothing to do, hosts starting at once wait for each other on the advisory lock instead of
//! racing, and an edited applied migration is refused.

use threadbase::store::postgres::migrate::{known, migrate, LOCK_CLASS};

use crate::support::postgres::TestSchema;

#[test]
fn a_fresh_schema_gets_every_migration_once() {
    let Some(pg) = TestSchema::new("a_fresh_schema_gets_every_migration_once") else {
        return;
    };
    let mut client = pg.connect();
    let applied = pg.block_on(migrate(&mut client)).unwrap();
    let applied: Vec<(i32, String)> = applied.into_iter().map(|m| (m.version, m.name)).collect();
    assert_eq!(applied, known());
    assert_eq!(applied[0], (1, "baseline".to_string()));
    assert!(pg.block_on(migrate(&mut client)).unwrap().is_empty());
    let recorded: i64 = pg
        .block_on(client.query_one("SELECT count(*) FROM refinery_schema_history", &[]))
        .unwrap()
        .get(0);
    assert_eq!(recorded, known().len() as i64);
    // The lock is not left held by this connection (other tests hold their own).
    let held: i64 = pg
        .block_on(client.query_one(
            "SELECT count(*) FROM pg_locks
             WHERE locktype = 'advisory' AND classid = $1::int::oid AND pid = pg_backend_pid()",
            &[&LOCK_CLASS],
        ))
        .unwrap()
        .get(0);
    assert_eq!(held, 0);
}

#[test]
fn hosts_migrating_at_once_wait_for_each_other() {
    let Some(pg) = TestSchema::new("hosts_migrating_at_once_wait_for_each_other") else {
        return;
    };
    // One connection holds the lock, as a host in the middle of migrating would.
    let holder = pg.connect();
    let schema = pg.name.clone();
    pg.block_on(holder.execute(
        "SELECT pg_advisory_lock($1, hashtext($2))",
        &[&LOCK_CLASS, &schema],
    ))
    .unwrap();
    // Four hosts start meanwhile.
    let runners: Vec<_> = (0..4)
        .map(|_| {
            let mut client = pg.connect();
            pg.runtime
                .spawn(async move { migrate(&mut client).await.map(|a| a.len()) })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        runners.iter().all(|r| !r.is_finished()),
        "a runner went on while the lock was held"
    );
    let tables: i64 = pg
        .block_on(holder.query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
            &[&schema],
        ))
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "nothing was created while the lock was held");
    pg.block_on(holder.execute(
        "SELECT pg_advisory_unlock($1, hashtext($2))",
        &[&LOCK_CLASS, &schema],
    ))
    .unwrap();
    let mut counts: Vec<usize> = runners
        .into_iter()
        .map(|r| pg.block_on(r).unwrap().expect("every runner succeeds"))
        .collect();
    counts.sort();
    // Exactly one applied the migrations; the others found nothing left to do.
    assert_eq!(counts, vec![0, 0, 0, known().len()]);
}

#[test]
fn an_edited_applied_migration_is_refused() {
    let Some(pg) = TestSchema::new("an_edited_applied_migration_is_refused") else {
        return;
    };
    let mut client = pg.connect();
    pg.block_on(migrate(&mut client)).unwrap();
    pg.block_on(client.execute(
        "UPDATE refinery_schema_history SET checksum = '1' WHERE version = 1",
        &[],
    ))
    .unwrap();
    let err = pg.block_on(migrate(&mut client)).unwrap_err();
    assert!(
        err.message.contains("migration") && err.message.contains("Repair:"),
        "{}",
        err.message
    );
}

#[test]
fn a_search_path_without_a_schema_is_refused_with_a_repair() {
    let Some(pg) = TestSchema::new("a_search_path_without_a_schema_is_refused") else {
        return;
    };
    let mut client = pg.connect();
    pg.block_on(client.batch_execute("SET search_path TO no_such_schema_here"))
        .unwrap();
    let err = pg.block_on(migrate(&mut client)).unwrap_err();
    assert!(
        err.message.contains("no schema") && err.message.contains("Repair:"),
        "{}",
        err.message
    );
}
