//! The HTTP exchanges the main loop starts outside the transfers: master fetches and
//! scheduler RPCs (`daemon/projects/poll.rs`), news feeds and the project list (`notices.rs`),
//! account-manager syncs (`acct_mgr.rs`) and the attach wizard's web RPCs
//! (`daemon/rpc/projects.rs`). Each runs in a tokio task that ends by sending its event to the
//! loop; they are kept here so that shutdown ends those still running instead of leaving
//! them to the runtime's teardown. (Transfers keep their own tasks, `Transfers::shutdown`.)

use std::future::Future;

use tokio::task::JoinSet;

/// The running HTTP exchanges.
#[derive(Debug, Default)]
pub struct HttpTasks {
    set: JoinSet<()>,
}

impl HttpTasks {
    /// Runs `exchange` in a task of its own (on the current tokio runtime). Tasks that ended
    /// since the last call are let go first, so the set holds only running ones and those
    /// that ended since.
    pub fn spawn(&mut self, exchange: impl Future<Output = ()> + Send + 'static) {
        while self.set.try_join_next().is_some() {}
        self.set.spawn(exchange);
    }

    /// The exchanges started and not yet let go (running, or ended since the last spawn).
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether no exchange is held.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Ends every exchange still running and waits until their tasks are gone; their
    /// events are not sent.
    pub async fn shutdown(&mut self) {
        self.set.abort_all();
        while self.set.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shutdown_ends_the_running_exchanges() {
        let mut tasks = HttpTasks::default();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
        // An exchange that never ends by itself, holding the sender as a real one holds
        // the loop's events sender.
        tasks.spawn(async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        assert_eq!(tasks.len(), 1);
        tasks.shutdown().await;
        assert!(tasks.is_empty());
        // The task was dropped with its sender: the channel is closed.
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn ended_exchanges_are_let_go_at_the_next_spawn() {
        let mut tasks = HttpTasks::default();
        let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<()>(1);
        tasks.spawn(async move {
            let _held_until_the_end = done_tx;
        });
        // The sender goes when the task ends (this test's runtime has one thread, so the
        // task is also complete when this wakes).
        assert_eq!(done_rx.recv().await, None);
        tasks.spawn(std::future::pending());
        assert_eq!(tasks.len(), 1, "the ended exchange was let go");
        tasks.shutdown().await;
    }
}
