//! Two writers on PostgreSQL that lock rows in opposite orders (issue 46 item 4: with no
//! global write lock, writes of different trees run at once, so PostgreSQL can find a
//! deadlock between them). The server aborts one transaction; `Store::write` rolls it back and
//! runs it again whole, so both writes land and neither caller sees the deadlock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use crate::support::postgres::TestSchema;

#[test]
fn a_write_that_loses_a_deadlock_runs_again_and_both_land() {
    let Some(pg) = TestSchema::new("a_write_that_loses_a_deadlock") else {
        return;
    };
    let url = pg.database_url();
    let open = || threadbase::Store::open(std::path::Path::new(&url)).unwrap();
    let setup = open();
    setup
        .write(|tx| {
            tx.execute_script(
                "CREATE TABLE dl (k INTEGER PRIMARY KEY, v INTEGER NOT NULL);
                 INSERT INTO dl VALUES (1, 0), (2, 0);",
            )
        })
        .unwrap();
    let both_hold_one = Arc::new(Barrier::new(2));
    let runs = Arc::new(AtomicUsize::new(0));
    let writer = |first: i64, second: i64| {
        let (store, barrier, runs) = (open(), both_hold_one.clone(), runs.clone());
        std::thread::spawn(move || {
            let mut tries = 0;
            store.write(|tx| {
                tries += 1;
                runs.fetch_add(1, Ordering::SeqCst);
                tx.execute_script(&format!("UPDATE dl SET v = v + 1 WHERE k = {first}"))?;
                if tries == 1 {
                    // Each holds its first row before either asks for its second.
                    barrier.wait();
                }
                tx.execute_script(&format!("UPDATE dl SET v = v + 1 WHERE k = {second}"))
            })
        })
    };
    let (a, b) = (writer(1, 2), writer(2, 1));
    a.join().unwrap().expect("the first writer's write lands");
    b.join().unwrap().expect("the second writer's write lands");
    assert_eq!(runs.load(Ordering::SeqCst), 3, "one of them ran again");
    let conn = setup.read().unwrap();
    let (_, rows) = conn.query_values("SELECT v FROM dl ORDER BY k").unwrap();
    assert_eq!(
        format!("{rows:?}"),
        "[[Int(2)], [Int(2)]]",
        "both writes, once each"
    );
}
