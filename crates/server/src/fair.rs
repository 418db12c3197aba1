//! The run slots (`SANDBOX_MAX_CONCURRENT_RUNS`) handed out fairly between users.
//!
//! A FIFO semaphore lets one user who queued a hundred runs hold every slot until the last of
//! them started, while another user's single run waits behind all of them. Here each user has
//! a line of their own, and a freed slot goes to the next user in turn (round robin over the
//! users who are waiting), so a user waits for at most one run of each other waiting user per
//! freed slot, whatever those users queued.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;

pub struct Slots {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    free: usize,
    /// Each waiting user's line, oldest first.
    lines: HashMap<String, VecDeque<oneshot::Sender<Slot>>>,
    /// The users with a line, in the order they are served.
    turn: VecDeque<String>,
}

/// A place in a line: a slot already, or one to wait for. Dropping it leaves the line.
pub enum Place {
    Ready(Slot),
    Waiting(oneshot::Receiver<Slot>),
}

impl Place {
    pub async fn slot(self) -> Slot {
        match self {
            Place::Ready(slot) => slot,
            // The sender lives in the line until a slot is sent through it, and only a slot
            // being sent removes it: the receiver cannot see it dropped unsent.
            Place::Waiting(rx) => rx
                .await
                .expect("a waiting slot's sender is only dropped after sending"),
        }
    }
}

/// One slot, given back when dropped (to the next waiting user, or to the free count).
pub struct Slot {
    slots: Option<Arc<Slots>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            slots.release();
        }
    }
}

impl Slots {
    pub fn new(n: usize) -> Arc<Slots> {
        Arc::new(Slots {
            state: Mutex::new(State {
                free: n,
                ..State::default()
            }),
        })
    }

    /// A slot now, if one is free and nobody waits for one (a newcomer never passes a
    /// waiting run).
    pub fn try_acquire(self: &Arc<Self>) -> Option<Slot> {
        let mut s = self.state.lock();
        if s.free == 0 || !s.turn.is_empty() {
            return None;
        }
        s.free -= 1;
        Some(Slot {
            slots: Some(self.clone()),
        })
    }

    /// Waits in `user`'s line for a slot. Dropping the future leaves the line (a slot handed
    /// to it meanwhile goes on to the next in turn).
    #[cfg(test)]
    pub async fn acquire(self: &Arc<Self>, user: &str) -> Slot {
        self.enqueue(user).slot().await
    }

    /// Takes a place in `user`'s line now (the order of places is the order of these calls),
    /// to be waited on with [`Place::slot`].
    pub fn enqueue(self: &Arc<Self>, user: &str) -> Place {
        let mut s = self.state.lock();
        if s.free > 0 && s.turn.is_empty() {
            s.free -= 1;
            return Place::Ready(Slot {
                slots: Some(self.clone()),
            });
        }
        let (tx, rx) = oneshot::channel();
        let line = s.lines.entry(user.to_string()).or_default();
        line.push_back(tx);
        if line.len() == 1 {
            s.turn.push_back(user.to_string());
        }
        Place::Waiting(rx)
    }

    /// How many runs wait for a slot.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.state.lock().lines.values().map(VecDeque::len).sum()
    }

    fn release(self: &Arc<Self>) {
        let mut s = self.state.lock();
        while let Some(user) = s.turn.pop_front() {
            let line = s.lines.get_mut(&user).expect("a user in turn has a line");
            let tx = line.pop_front().expect("a line in turn is not empty");
            if line.is_empty() {
                s.lines.remove(&user);
            } else {
                s.turn.push_back(user);
            }
            let slot = Slot {
                slots: Some(self.clone()),
            };
            match tx.send(slot) {
                Ok(()) => return,
                // That waiter gave up: the slot goes on, without being released here again
                // (this lock is held).
                Err(mut slot) => slot.slots = None,
            }
        }
        s.free += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn freed_slots_go_round_robin_between_users() {
        let slots = Slots::new(1);
        let held = slots.try_acquire().expect("one free slot");
        assert!(slots.try_acquire().is_none());
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // User a queues five runs before user b queues two.
        for (user, n) in [("a", 5), ("b", 2)] {
            for i in 0..n {
                let (slots, order) = (slots.clone(), order.clone());
                tasks.push(tokio::spawn(async move {
                    let slot = slots.acquire(user).await;
                    order.lock().push(format!("{user}{i}"));
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    drop(slot);
                }));
                settle().await;
            }
        }
        assert_eq!(slots.waiting(), 7);
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(
            *order.lock(),
            ["a0", "b0", "a1", "b1", "a2", "a3", "a4"],
            "b's runs must not wait behind all of a's"
        );
        assert_eq!(slots.waiting(), 0);
        assert!(slots.try_acquire().is_some(), "the slot came back");
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_passes_its_slot_on() {
        let slots = Slots::new(1);
        let held = slots.try_acquire().unwrap();
        let gone = tokio::spawn({
            let slots = slots.clone();
            async move { slots.acquire("a").await }
        });
        settle().await;
        let next = tokio::spawn({
            let slots = slots.clone();
            async move { slots.acquire("b").await }
        });
        settle().await;
        gone.abort();
        let _ = gone.await;
        drop(held);
        let slot = tokio::time::timeout(Duration::from_secs(5), next)
            .await
            .expect("b got the slot a gave up")
            .unwrap();
        assert!(slots.try_acquire().is_none());
        drop(slot);
        assert!(slots.try_acquire().is_some());
    }

    #[tokio::test]
    async fn newcomers_do_not_pass_waiting_runs() {
        let slots = Slots::new(2);
        let a = slots.try_acquire().unwrap();
        let _b = slots.try_acquire().unwrap();
        let waiter = tokio::spawn({
            let slots = slots.clone();
            async move { slots.acquire("w").await }
        });
        settle().await;
        drop(a);
        // The freed slot went to the waiter, not to the free count.
        assert!(slots.try_acquire().is_none());
        let _w = waiter.await.unwrap();
    }
}
