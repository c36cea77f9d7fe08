//! The HTTP server's connection table: who holds a connection, since when it has been
//! quiet, whether it is in the middle of a request. When the server is full, a newcomer
//! takes the place of a quiet connection (one that sent nothing yet, or nothing since its
//! last reply), the peer's own first when that peer holds more than its share, so a flood of
//! idle or slow connections cannot keep a real scrape or the dashboard out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

/// One open connection.
#[derive(Debug)]
struct Entry {
    peer: IpAddr,
    /// Since when it has been quiet (accepted, or its last reply sent).
    quiet_since: Instant,
    /// Requests being served on it.
    busy: u32,
    /// Closes it.
    close: CancellationToken,
}

/// The open connections, shared by the accept loop and the connection tasks.
#[derive(Debug, Clone, Default)]
pub(super) struct Table {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    open: HashMap<u64, Entry>,
}

impl Table {
    /// Registers a connection from `peer`; returns its id and the token that closes it.
    pub(super) fn add(&self, peer: IpAddr, now: Instant) -> (u64, CancellationToken) {
        let mut t = self.lock();
        t.next_id += 1;
        let id = t.next_id;
        let close = CancellationToken::new();
        t.open.insert(
            id,
            Entry {
                peer,
                quiet_since: now,
                busy: 0,
                close: close.clone(),
            },
        );
        (id, close)
    }

    /// Forgets a connection (its task ended).
    pub(super) fn remove(&self, id: u64) {
        self.lock().open.remove(&id);
    }

    /// A request began on `id`.
    pub(super) fn begin(&self, id: u64) {
        if let Some(e) = self.lock().open.get_mut(&id) {
            e.busy += 1;
        }
    }

    /// A request on `id` was answered at `now`.
    pub(super) fn end(&self, id: u64, now: Instant) {
        if let Some(e) = self.lock().open.get_mut(&id) {
            e.busy = e.busy.saturating_sub(1);
            e.quiet_since = now;
        }
    }

    /// Closes one quiet connection to make room for a newcomer from `peer`: that peer's
    /// quiet the longest when it holds `per_peer` or more, else anyone's quiet the longest.
    /// Returns whether one was closed (none when every connection is serving a request).
    pub(super) fn evict_for(&self, peer: IpAddr, per_peer: usize) -> bool {
        let mut t = self.lock();
        let own = t.open.values().filter(|e| e.peer == peer).count();
        let victim = t
            .open
            .iter()
            .filter(|(_, e)| e.busy == 0 && (own < per_peer || e.peer == peer))
            .min_by_key(|(id, e)| (e.quiet_since, **id))
            .map(|(id, _)| *id);
        match victim.and_then(|id| t.open.remove(&id)) {
            Some(e) => {
                e.close.cancel();
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_quiet_go_first_and_busy_ones_stay() {
        let t = Table::default();
        let t0 = Instant::now();
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let (old_busy, c_old_busy) = t.add(a, t0);
        t.begin(old_busy);
        let (_, c_quiet) = t.add(b, t0 + Duration::from_secs(1));
        let (_, c_new) = t.add(a, t0 + Duration::from_secs(2));
        // The oldest is serving a request: the quiet one from `b` goes.
        assert!(t.evict_for(a, 100));
        assert!(!c_old_busy.is_cancelled());
        assert!(c_quiet.is_cancelled());
        assert!(!c_new.is_cancelled());
        // A peer at its share loses its own quiet connection, not another's.
        let (_, c_b) = t.add(b, t0 + Duration::from_secs(3));
        assert!(t.evict_for(a, 2));
        assert!(c_new.is_cancelled());
        assert!(!c_b.is_cancelled());
        // Nothing quiet is left of `a`'s: the answer says so.
        assert!(!t.evict_for(a, 1));
        t.end(old_busy, t0 + Duration::from_secs(4));
        assert!(t.evict_for(a, 1));
        assert!(c_old_busy.is_cancelled());
    }
}
