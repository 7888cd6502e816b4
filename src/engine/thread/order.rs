//! Starts reserve their rows in the order serve read their request lines. The Pi extension
//! forwards the parallel tool calls of one assistant message as separate request lines, in the
//! message's order, and serve runs requests concurrently, so two starts' reserving
//! transactions could commit in either order. That order is the queue's (`THREADBASE_QUEUE=1`:
//! rank by rowid, `sql/queue_rank.sql`) and decides which start takes the last free slot, so
//! serve's read loop takes a [`StartTurn`] for each `start` line as it reads it (one counter,
//! no await), and `start` waits for every earlier start's turn to end before its reserving
//! transaction; the turn ends when that transaction commits, or when its request ends before
//! (a refused start, a cancelled request). Only the reservation is ordered: launches still
//! run side by side. So rowid order is request order and the queue's queries need no other
//! order column.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

/// The starts read but not reserved yet, by arrival number.
pub struct StartOrder {
    next: AtomicU64,
    pending: watch::Sender<BTreeSet<u64>>,
}

impl Default for StartOrder {
    fn default() -> Self {
        StartOrder {
            next: AtomicU64::new(0),
            pending: watch::channel(BTreeSet::new()).0,
        }
    }
}

impl StartOrder {
    /// A start request just read: its turn, after every start read before it.
    pub fn arrive(self: &Arc<Self>) -> StartTurn {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.pending.send_modify(|p| {
            p.insert(n);
        });
        StartTurn {
            n,
            order: self.clone(),
        }
    }
}

/// One start's place in the order its request line was read; dropping it lets the next start
/// reserve.
pub struct StartTurn {
    n: u64,
    order: Arc<StartOrder>,
}

impl StartTurn {
    /// Waits until every start read before this one has reserved its row (or ended).
    pub async fn wait(&self) {
        let mut rx = self.order.pending.subscribe();
        // The sender lives as long as `self.order`, so this cannot fail.
        let _ = rx.wait_for(|p| p.first() == Some(&self.n)).await;
    }
}

impl Drop for StartTurn {
    fn drop(&mut self) {
        self.order.pending.send_modify(|p| {
            p.remove(&self.n);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Turns taken 0, 1, 2 reserve in that order whatever order their tasks run in, and a turn
    /// dropped without reserving lets the next one go.
    #[tokio::test]
    async fn turns_reserve_in_arrival_order() {
        let order = Arc::new(StartOrder::default());
        let turns: Vec<StartTurn> = (0..4).map(|_| order.arrive()).collect();
        let done = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, turn) in turns.into_iter().enumerate().rev() {
            let done = done.clone();
            tasks.push(tokio::spawn(async move {
                if i == 2 {
                    // Refused before its reservation: it never waits.
                    return;
                }
                turn.wait().await;
                done.lock().unwrap().push(i);
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(turn);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*done.lock().unwrap(), [0, 1, 3]);
    }
}
