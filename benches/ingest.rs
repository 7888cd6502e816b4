//! Event ingest throughput through `events::append` inside `Store::write` (DESIGN.md target:
//! ≥ 200,000 events/s sustained).
//!
//! - `ingest/batched/256`: one write transaction per batch of 256 events, 32 to each of 8
//!   threads of one manager, as the ingest path batches child streams.
//! - `ingest/unbatched/1`: one event per write transaction, round-robin over the 8 threads.
//!
//! Events are shaped like real compact lifecycle events (turn, tool and assistant message
//! events with their JSON data). The ring trim runs as in production: every thread is past its
//! 40 retained events after the first few batches.

mod support;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use threadbase::store::events::{append, NewEvent};

/// Threads the events are spread over.
const THREADS: usize = 8;
/// Events per write transaction in the batched bench.
const BATCH: usize = 256;
/// Threads in the seeded tree the 8 event targets live in.
const TREE: usize = 10 * support::BLOCK;

/// One thread's share of a batch: a turn with tool calls and assistant messages.
fn thread_events(at: &str, per_thread: usize) -> Vec<NewEvent<'_>> {
    const PATTERN: [(&str, &str); 8] = [
        ("turn_started", "{}"),
        ("tool_started", r#"{"toolName":"bash"}"#),
        ("tool_completed", r#"{"toolName":"bash","isError":false}"#),
        (
            "assistant_message",
            r#"{"text":"I ran the test suite: 214 passed, 2 failed in store::events. Looking at the ring trim next."}"#,
        ),
        ("tool_started", r#"{"toolName":"read"}"#),
        ("tool_completed", r#"{"toolName":"read","isError":false}"#),
        (
            "assistant_message",
            r#"{"text":"The trim deletes by primary-key range, so the failing case is the off-by-one at seq 40."}"#,
        ),
        ("turn_completed", "{}"),
    ];
    (0..per_thread)
        .map(|i| {
            let (kind, data) = PATTERN[i % PATTERN.len()];
            NewEvent { at, kind, data }
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let db = support::open_db();
    support::seed_tree(&db, TREE);
    // The top-level threads of the first 8 blocks.
    let ids: Vec<String> = (0..THREADS)
        .map(|b| support::thread_id(support::top_row(b)))
        .collect();
    let at = threadbase::time::now_iso();
    let batch = thread_events(&at, BATCH / THREADS);
    let singles = thread_events(&at, 64);

    let mut g = c.benchmark_group("ingest");
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));

    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function(BenchmarkId::new("batched", BATCH), |b| {
        b.iter(|| {
            db.store
                .write(|tx| {
                    let mut last = 0;
                    for id in &ids {
                        last = append(tx, id, black_box(&batch))?;
                    }
                    Ok(last)
                })
                .unwrap()
        })
    });

    g.throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::new("unbatched", 1), |b| {
        let mut i = 0usize;
        b.iter(|| {
            let id = &ids[i % THREADS];
            let event = &singles[i % singles.len()..][..1];
            i += 1;
            db.store
                .write(|tx| append(tx, id, black_box(event)))
                .unwrap()
        })
    });
    g.finish();

    // Every event went through the ring: each thread keeps exactly its newest 40.
    let conn = db.store.read().expect("reader");
    for id in &ids {
        let kept = threadbase::store::events::of_thread(&conn, id).expect("events");
        assert_eq!(
            kept.len() as i64,
            threadbase::store::events::RETAINED_EVENTS
        );
        assert!(kept.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    }
}

criterion_group!(ingest_benches, benches);
criterion_main!(ingest_benches);
