//! Contract A's notices on this serve's side: a `wait` holds back the notices of the thread it
//! waits on (the row watcher leaves them pending while the hold lasts), and a wait that reports
//! the thread settled or closed marks them delivered ([`crate::store::notices::quiet`]), so the
//! caller does not get the same news from the result and again as a notice. A wait that timed
//! out reports nothing new: its release lets the watcher deliver them.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::domain::ThreadId;

/// The threads whose notices a running request holds back, with how many requests hold each.
#[derive(Default)]
pub struct NoticeHolds {
    held: Mutex<HashMap<ThreadId, usize>>,
    released: Notify,
}

impl NoticeHolds {
    /// Holds `thread_id`'s notices until the guard drops.
    pub fn hold(&self, thread_id: &ThreadId) -> Hold<'_> {
        *self
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(thread_id.clone())
            .or_default() += 1;
        Hold {
            holds: self,
            thread_id: thread_id.clone(),
        }
    }

    /// Whether a request holds `thread_id`'s notices now.
    pub fn is_held(&self, thread_id: &ThreadId) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(thread_id)
    }

    /// Resolves when a hold was released (the watcher then delivers what is still due).
    pub async fn released(&self) {
        self.released.notified().await
    }
}

/// One request's hold on a thread's notices.
pub struct Hold<'a> {
    holds: &'a NoticeHolds,
    thread_id: ThreadId,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        let mut held = self.holds.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(&self.thread_id) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.thread_id);
            }
        }
        drop(held);
        self.holds.released.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_held_while_any_of_its_holds_lasts() {
        let holds = NoticeHolds::default();
        let (t1, t2) = (ThreadId::new("t1"), ThreadId::new("t2"));
        let a = holds.hold(&t1);
        let b = holds.hold(&t1);
        assert!(holds.is_held(&t1));
        assert!(!holds.is_held(&t2));
        drop(a);
        assert!(holds.is_held(&t1));
        drop(b);
        assert!(!holds.is_held(&t1));
    }
}
