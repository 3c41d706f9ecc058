//! When this node's controller may decide writes: only as the leader of the metadata quorum,
//! and only once it has applied the log up to the start of its own term.
//!
//! A newly elected leader's published image can lag entries the previous leader committed;
//! validating against it could accept a second create of a name that already exists. Kafka's
//! controller replays up to its epoch's start before it becomes active; here openraft commits a
//! blank entry at the start of each term, and `ensure_linearizable` (the read index) confirms
//! leadership and waits until the state machine, hence the loader, has applied at least that
//! entry. Only then is the controller [`Activation::Active`] for that term.
//!
//! ```text
//!  raft metrics ──leader of term T──▶ CatchingUp{T} ──read index applied──▶ Active{T}
//!       └──────────not leader─────────▶ Inactive
//! ```

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::raft::{MetadataLog, MetadataLogError};

/// The controller's standing in the quorum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// Not the leader: writes are refused with NOT_CONTROLLER.
    Inactive,
    /// Leader of `term`, still applying the log up to the start of the term: writes wait.
    CatchingUp {
        /// The raft term.
        term: u64,
    },
    /// Leader of `term` with everything before the term applied: writes are decided.
    Active {
        /// The raft term.
        term: u64,
    },
}

/// Pause before asking again after a failed read index (a quorum not reachable yet).
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Follows the raft metrics of `log` and publishes the controller's activation into `sender`
/// (and `kafka_controller_kafkacontroller_activecontrollercount`) until the log shuts down.
pub(super) async fn run(log: Arc<MetadataLog>, sender: watch::Sender<Activation>) {
    let mut metrics = log.metrics_watch();
    loop {
        let leading_term = {
            let m = metrics.borrow_and_update();
            (m.current_leader == Some(m.id)).then_some(m.current_term)
        };
        match leading_term {
            None => {
                sender.send_if_modified(|a| replace(a, Activation::Inactive));
            }
            Some(term) if *sender.borrow() == (Activation::Active { term }) => {}
            Some(term) => {
                sender.send_if_modified(|a| replace(a, Activation::CatchingUp { term }));
                match log.read_index().await {
                    Ok(_) => {
                        // Still the leader of that term: everything before it is applied.
                        let m = log.metrics();
                        if m.current_leader == Some(m.id) && m.current_term == term {
                            tracing::info!(term, "active controller: the log is applied up to the start of this term");
                            sender.send_if_modified(|a| replace(a, Activation::Active { term }));
                        }
                        continue;
                    }
                    Err(MetadataLogError::Shutdown(_)) => return,
                    Err(error) => {
                        tracing::debug!(term, %error, "cannot confirm leadership yet");
                        tokio::time::sleep(RETRY_PAUSE).await;
                        continue;
                    }
                }
            }
        }
        gregor_metrics::active_controller(matches!(*sender.borrow(), Activation::Active { .. }));
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

fn replace(current: &mut Activation, next: Activation) -> bool {
    if *current == next {
        return false;
    }
    *current = next;
    true
}
