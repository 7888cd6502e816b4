//! Notices held back on this serve's side, one mechanism for contracts A and B: a request that
//! will itself report a thread (A's `wait`; B's blocking spawn, wait and stop) holds that
//! thread's notices for its caller, and the row watcher leaves them pending while the hold
//! lasts, so the caller does not get the same news from the result and again as a notice. A
//! request that reports the thread settled or closed marks them delivered (A:
//! [`crate::store::notices::quiet`]; B: `agent/notices.rs` `supersede_notices`). Contract B's
//! settlement, written while its thread is held, is written delivered at once ([`quieted`]):
//! if the hold ends without reporting it, its release makes it due again. A request that
//! reported nothing new (a wait that timed out) releases the hold and the watcher delivers
//! what is still due.
//!
//! [`quieted`]: NoticeHolds::quieted

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::domain::ThreadId;
use crate::store::agents::mailbox;
use crate::store::Store;

/// The threads whose notices a running request holds back.
#[derive(Default)]
pub struct NoticeHolds {
    held: Mutex<HashMap<ThreadId, Held>>,
    released: Notify,
}

/// One thread's hold: how many requests hold it, and the notices written delivered meanwhile
/// (no other serve of the same caller may send them first) that its release reopens unless
/// the request reported them.
#[derive(Default)]
struct Held {
    count: usize,
    quiet: Vec<i64>,
}

impl NoticeHolds {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<ThreadId, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds `thread_id`'s notices until the guard drops; notices it quieted are reopened in
    /// `store` then.
    pub fn hold<'a>(&'a self, store: &'a Store, thread_id: &ThreadId) -> Hold<'a> {
        self.held().entry(thread_id.clone()).or_default().count += 1;
        Hold {
            holds: self,
            store,
            thread_id: thread_id.clone(),
        }
    }

    /// Whether a request holds `thread_id`'s notices now.
    pub fn is_held(&self, thread_id: &ThreadId) -> bool {
        self.held().contains_key(thread_id)
    }

    /// The notice `mailbox_id` about the held `thread_id` was written delivered: reopened when
    /// the hold ends unless [`NoticeHolds::reported`] comes first.
    pub(crate) fn quieted(&self, thread_id: &ThreadId, mailbox_id: i64) {
        if let Some(h) = self.held().get_mut(thread_id) {
            h.quiet.push(mailbox_id);
        }
    }

    /// The request reported `thread_id`'s news: the notices it quieted stay delivered.
    pub(crate) fn reported(&self, thread_id: &ThreadId) {
        if let Some(h) = self.held().get_mut(thread_id) {
            h.quiet.clear();
        }
    }

    /// Resolves when a hold was released (the watcher then delivers what is still due).
    pub async fn released(&self) {
        self.released.notified().await
    }
}

/// One request's hold on a thread's notices.
pub struct Hold<'a> {
    holds: &'a NoticeHolds,
    store: &'a Store,
    thread_id: ThreadId,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        let mut held = self.holds.held();
        let mut reopen = Vec::new();
        if let Some(h) = held.get_mut(&self.thread_id) {
            h.count -= 1;
            if h.count == 0 {
                reopen = std::mem::take(&mut h.quiet);
                held.remove(&self.thread_id);
            }
        }
        drop(held);
        // The request ended without reporting the settlement it quieted (it read the row just
        // before the thread settled): the notice is due after all.
        if !reopen.is_empty() {
            if let Err(e) = self.store.write(|tx| mailbox::reopen_notices(tx, &reopen)) {
                eprintln!("threadbase serve: a held notice could not be released: {e}");
            }
        }
        self.holds.released.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_held_while_any_of_its_holds_lasts() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("t.sqlite")).unwrap();
        let holds = NoticeHolds::default();
        let (t1, t2) = (ThreadId::new("t1"), ThreadId::new("t2"));
        let a = holds.hold(&store, &t1);
        let b = holds.hold(&store, &t1);
        assert!(holds.is_held(&t1));
        assert!(!holds.is_held(&t2));
        drop(a);
        assert!(holds.is_held(&t1));
        drop(b);
        assert!(!holds.is_held(&t1));
    }
}
