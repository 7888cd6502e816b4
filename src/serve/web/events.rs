//! The page's live updates: server-sent events driven by the database's change counter.
//!
//! One task ([`Hub::start`]) reads the change counter (`Store::change_watch`, `PRAGMA
//! data_version`: it moves whenever another connection, of this process or another, commits)
//! every [`POLL`], and counts the moves in a `watch` channel: one number, whatever the number of
//! pages. Each open page holds one stream ([`stream`]) that sends `event: change` with the id
//! `<boot>-<n>` whenever the number moves, several moves between two sends coalescing into
//! one, and a comment line every [`KEEPALIVE`] (which also ends the task of a page that went
//! away). The event says only that something changed; the page then reads what it shows. A
//! reconnect sends `Last-Event-ID`: when it names the current count nothing is sent until the
//! next change, otherwise (a change was missed, or this is another run of the server) a
//! `change` goes out at once. Memory is bounded: one count, and per stream a channel of
//! [`BUFFERED`] frames; at most [`MAX_STREAMS`] streams at once.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::channel::Channel;
use http_body_util::Either;
use hyper::header::HeaderValue;
use tokio::sync::{watch, Semaphore};

use super::Body;
use crate::error::{Error, Result};
use crate::Store;

/// How often the change counter is read.
pub const POLL: Duration = Duration::from_millis(50);
/// How often an idle stream sends a comment line.
pub const KEEPALIVE: Duration = Duration::from_secs(15);
/// Frames a stream's channel holds before its task waits for the connection.
pub const BUFFERED: usize = 4;
/// Event streams open at once; past it a page gets 503 and its browser retries.
pub const MAX_STREAMS: usize = 32;

/// The change count every stream follows.
pub struct Hub {
    count: watch::Receiver<u64>,
    /// Tells this run's event ids from another run's.
    boot: String,
    streams: Arc<Semaphore>,
}

impl Hub {
    /// Starts the task that reads the change counter of `store` until `stop` turns true.
    pub fn start(store: &Store, mut stop: watch::Receiver<bool>) -> Result<Hub> {
        let mut watch = store.change_watch()?;
        let (tx, count) = watch::channel(0u64);
        tokio::spawn(async move {
            let mut seen = watch.version().ok();
            let mut tick = tokio::time::interval(POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.changed() => break,
                }
                if *stop.borrow() {
                    break;
                }
                match watch.version() {
                    Ok(v) if Some(v) != seen => {
                        seen = Some(v);
                        tx.send_modify(|n| *n += 1);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!("reading the change counter failed: {e}"),
                }
            }
        });
        Ok(Hub {
            count,
            boot: crate::ids::random_hex(6),
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
        })
    }

    /// The id of the current count.
    pub fn event_id(&self) -> String {
        format!("{}-{}", self.boot, *self.count.borrow())
    }
}

/// One page's event stream, resuming after `last` (its `Last-Event-ID`).
pub fn stream(
    hub: &Hub,
    last: Option<String>,
    mut stop: watch::Receiver<bool>,
) -> hyper::Response<Body> {
    let Ok(permit) = hub.streams.clone().try_acquire_owned() else {
        let mut out = super::error(&Error::new(
            crate::error::ErrorCode::Limit,
            format!("{MAX_STREAMS} pages are following changes already. Repair: close a page; this one retries by itself."),
        ));
        *out.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
        return out;
    };
    let (mut tx, body) = Channel::<Bytes>::new(BUFFERED);
    let mut count = hub.count.clone();
    let boot = hub.boot.clone();
    tokio::spawn(async move {
        let _permit = permit;
        let event = |n: u64| {
            Bytes::from(format!(
                "id: {boot}-{n}\nevent: change\ndata: {{\"change\":{n}}}\n\n"
            ))
        };
        let mut n = *count.borrow_and_update();
        if tx
            .send_data(Bytes::from_static(b"retry: 1000\n\n"))
            .await
            .is_err()
        {
            return;
        }
        if last.as_deref() != Some(format!("{boot}-{n}").as_str())
            && tx.send_data(event(n)).await.is_err()
        {
            return;
        }
        loop {
            let frame = tokio::select! {
                changed = count.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    n = *count.borrow_and_update();
                    event(n)
                }
                _ = tokio::time::sleep(KEEPALIVE) => Bytes::from_static(b": keepalive\n\n"),
                _ = stop.changed() => return,
            };
            if tx.send_data(frame).await.is_err() {
                return;
            }
        }
    });
    let mut out = hyper::Response::new(Either::Right(body));
    let h = out.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    out
}
