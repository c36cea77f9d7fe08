//! The per-task FIFO of process-control messages (client/app.cpp `MSG_QUEUE` semantics).
//!
//! The request channel holds one message at a time, so messages wait here until the app has
//! read the previous one. A suspend cancels a resume still waiting at the tail, and vice versa.

use std::collections::VecDeque;
use std::time::Instant;

use crate::msg::ControlMsg;
use crate::shmem::{Channel, SharedMem};

/// Waiting process-control messages.
#[derive(Debug, Default)]
pub struct ControlQueue {
    /// Messages not yet written to the channel, oldest first.
    pending: VecDeque<ControlMsg>,
    /// When the head was first found blocked (a hung app shows here).
    blocked_since: Option<Instant>,
}

impl ControlQueue {
    /// Adds a message, cancelling an opposite suspend/resume waiting at the tail.
    pub fn push(&mut self, msg: ControlMsg) {
        let cancels = matches!(
            (self.pending.back(), msg),
            (Some(ControlMsg::Resume), ControlMsg::Suspend)
                | (Some(ControlMsg::Suspend), ControlMsg::Resume)
        );
        if cancels {
            self.pending.pop_back();
        } else {
            self.pending.push_back(msg);
        }
    }

    /// Messages still waiting.
    pub fn pending(&self) -> impl Iterator<Item = &ControlMsg> {
        self.pending.iter()
    }

    /// Since when the head has been waiting for a free channel.
    pub fn blocked_since(&self) -> Option<Instant> {
        self.blocked_since
    }

    /// Restarts the blocked clock (after the app was stopped by a signal, when it could not
    /// have read anything).
    pub fn reset_blocked(&mut self, now: Instant) {
        if self.blocked_since.is_some() {
            self.blocked_since = Some(now);
        }
    }

    /// Writes the head into the channel if it is free.
    pub fn flush(&mut self, shm: &SharedMem, now: Instant) {
        let Some(head) = self.pending.front() else {
            self.blocked_since = None;
            return;
        };
        if shm.send(Channel::ProcessControlRequest, head.encode()) {
            self.pending.pop_front();
            self.blocked_since = None;
        } else if self.blocked_since.is_none() {
            self.blocked_since = Some(now);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn opposite_tail_cancels() {
        let mut q = ControlQueue::default();
        q.push(ControlMsg::Suspend);
        q.push(ControlMsg::Resume);
        assert_eq!(q.pending().count(), 0);
        q.push(ControlMsg::Quit);
        q.push(ControlMsg::Suspend);
        q.push(ControlMsg::Resume);
        assert_eq!(
            q.pending().copied().collect::<Vec<_>>(),
            vec![ControlMsg::Quit]
        );
    }

    #[test]
    fn flush_waits_for_free_channel() {
        let dir = tempfile::tempdir().unwrap();
        let shm = SharedMem::create(&dir.path().join("m")).unwrap();
        let now = Instant::now();
        let mut q = ControlQueue::default();
        q.push(ControlMsg::Suspend);
        q.push(ControlMsg::Quit);
        q.flush(&shm, now);
        assert_eq!(q.pending().count(), 1);
        q.flush(&shm, now);
        assert_eq!(q.blocked_since(), Some(now));
        assert_eq!(
            shm.receive(Channel::ProcessControlRequest).as_deref(),
            Some("<suspend/>")
        );
        q.flush(&shm, now);
        assert_eq!(q.pending().count(), 0);
        assert_eq!(q.blocked_since(), None);
        assert_eq!(
            shm.receive(Channel::ProcessControlRequest).as_deref(),
            Some("<quit/>")
        );
    }
}
