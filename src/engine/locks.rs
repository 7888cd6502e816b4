//! One map of per-thread async locks for the serve: a thread's launches and deliveries never
//! overlap in this process (contracts B and C share it). An entry lives while someone holds or
//! waits for it, so the map holds only threads being worked on.

use std::collections::HashMap;

use crate::domain::ThreadId;
use std::sync::{Arc, Mutex};

type Entry = Arc<tokio::sync::Mutex<()>>;

#[derive(Default)]
pub(crate) struct LockMap {
    map: Mutex<HashMap<ThreadId, Entry>>,
}

/// A held per-thread lock; releasing it drops the map's entry when nobody else waits.
pub(crate) struct ThreadLock<'a> {
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    map: &'a LockMap,
    id: ThreadId,
}

impl LockMap {
    /// Waits for `id`'s lock.
    pub(crate) async fn lock(&self, id: &ThreadId) -> ThreadLock<'_> {
        let entry = self.entries().entry(id.clone()).or_default().clone();
        ThreadLock {
            guard: Some(entry.lock_owned().await),
            map: self,
            id: id.clone(),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<ThreadId, Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries().len()
    }
}

impl Drop for ThreadLock<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut map = self.map.entries();
        // Only the map holds it: nobody holds or waits (a waiter cloned it under this mutex).
        if map.get(&self.id).is_some_and(|e| Arc::strong_count(e) == 1) {
            map.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_at_a_time_and_entries_go_when_released() {
        let locks = Arc::new(LockMap::default());
        let held = locks.lock(&ThreadId::new("a")).await;
        let other = Arc::clone(&locks);
        let waiter = tokio::spawn(async move {
            let _g = other.lock(&ThreadId::new("a")).await;
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "a second holder got in");
        let _b = locks.lock(&ThreadId::new("b")).await;
        drop(held);
        waiter.await.unwrap();
        assert_eq!(locks.len(), 1, "only b is still held");
        drop(_b);
        assert_eq!(locks.len(), 0);
    }
}
