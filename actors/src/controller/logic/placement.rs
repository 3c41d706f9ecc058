//! Replica placement for new partitions, after Kafka's `StripedReplicaPlacer`.
//!
//! Brokers in controlled shutdown are not usable. The usable brokers are grouped by rack; each
//! partition takes its first replica from an unfenced broker of the next rack in turn, and its
//! other replicas from the following racks (unfenced brokers first, fenced ones only when a
//! rack has no unfenced broker left in this round). Each rack's broker list and the rack list
//! start at a random offset and advance by one per partition, so leaders and followers are
//! striped across brokers and racks. Once every unfenced broker has led a partition, the racks
//! and brokers are reshuffled. The randomness comes from the caller's `RngCore`, so tests are
//! exact.

use rand::{Rng, RngCore};

use super::view::BrokerView;

/// Why no placement exists. `Display` is Kafka's `InvalidReplicationFactorException` text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// Replication factor of zero or less.
    #[error("Invalid replication factor {0}: the replication factor must be positive.")]
    NonPositive(i32),
    /// No unfenced broker.
    #[error("All brokers are currently fenced.")]
    AllFenced,
    /// Fewer usable brokers than replicas.
    #[error("The target replication factor of {replication_factor} cannot be reached because only {brokers} broker(s) are registered.")]
    TooFewBrokers {
        /// Requested replicas per partition.
        replication_factor: i32,
        /// Usable (registered, not shutting down) brokers.
        brokers: usize,
    },
}

fn below(rng: &mut dyn RngCore, n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        rng.random_range(0..n)
    }
}

fn shuffle<T>(items: &mut [T], rng: &mut dyn RngCore) {
    for i in (1..items.len()).rev() {
        let j = below(rng, i + 1);
        items.swap(i, j);
    }
}

/// The brokers of one rack in one fencing state, walked round-robin from a moving offset.
#[derive(Debug, Default)]
struct BrokerList {
    brokers: Vec<i32>,
    index: usize,
    offset: usize,
    epoch: usize,
}

impl BrokerList {
    fn initialize(&mut self, rng: &mut dyn RngCore) {
        if !self.brokers.is_empty() {
            self.brokers.sort_unstable();
            self.offset = below(rng, self.brokers.len());
        }
    }

    /// The next broker of round `epoch`; each broker is returned at most once per round.
    fn next(&mut self, epoch: usize) -> Option<i32> {
        let len = self.brokers.len();
        if len == 0 {
            return None;
        }
        if self.epoch != epoch {
            self.epoch = epoch;
            self.index = 0;
            self.offset = (self.offset + 1) % len;
        }
        if self.index >= len {
            return None;
        }
        let broker = self.brokers.get((self.index + self.offset) % len).copied();
        self.index += 1;
        broker
    }
}

#[derive(Debug, Default)]
struct Rack {
    unfenced: BrokerList,
    fenced: BrokerList,
}

impl Rack {
    fn next(&mut self, epoch: usize) -> Option<i32> {
        self.unfenced
            .next(epoch)
            .or_else(|| self.fenced.next(epoch))
    }
}

/// The striping state over all racks for one placement call.
#[derive(Debug)]
struct RackList {
    /// Racks in placement order (sorted by name, no-rack first; reshuffled later).
    racks: Vec<Rack>,
    total: usize,
    unfenced: usize,
    epoch: usize,
    offset: usize,
}

impl RackList {
    fn new(brokers: &[BrokerView], rng: &mut dyn RngCore) -> Self {
        let mut named: Vec<(Option<String>, Rack)> = Vec::new();
        let (mut total, mut unfenced) = (0, 0);
        for broker in brokers.iter().filter(|b| !b.in_controlled_shutdown) {
            let position = match named.iter().position(|(rack, _)| *rack == broker.rack) {
                Some(position) => position,
                None => {
                    named.push((broker.rack.clone(), Rack::default()));
                    named.len() - 1
                }
            };
            if let Some((_, rack)) = named.get_mut(position) {
                if broker.fenced {
                    rack.fenced.brokers.push(broker.id);
                } else {
                    unfenced += 1;
                    rack.unfenced.brokers.push(broker.id);
                }
            }
            total += 1;
        }
        named.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, rack) in &mut named {
            rack.fenced.initialize(rng);
            rack.unfenced.initialize(rng);
        }
        let racks: Vec<Rack> = named.into_iter().map(|(_, rack)| rack).collect();
        let offset = below(rng, racks.len());
        RackList {
            racks,
            total,
            unfenced,
            epoch: 0,
            offset,
        }
    }

    fn check(&self, replication_factor: i32) -> Result<(), PlacementError> {
        if replication_factor <= 0 {
            return Err(PlacementError::NonPositive(replication_factor));
        }
        if self.unfenced == 0 {
            return Err(PlacementError::AllFenced);
        }
        if replication_factor as usize > self.total {
            return Err(PlacementError::TooFewBrokers {
                replication_factor,
                brokers: self.total,
            });
        }
        Ok(())
    }

    fn shuffle(&mut self, rng: &mut dyn RngCore) {
        shuffle(&mut self.racks, rng);
        for rack in &mut self.racks {
            shuffle(&mut rack.fenced.brokers, rng);
            shuffle(&mut rack.unfenced.brokers, rng);
        }
    }

    fn place(
        &mut self,
        replication_factor: i32,
        rng: &mut dyn RngCore,
    ) -> Result<Vec<i32>, PlacementError> {
        self.check(replication_factor)?;
        if self.epoch == self.unfenced && self.unfenced > 1 {
            self.shuffle(rng);
            self.epoch = 0;
        }
        let racks = self.racks.len();
        if self.offset == racks {
            self.offset = 0;
        }
        // Every step below takes a broker or exhausts a rack for this round; the checks above
        // guarantee enough brokers, so this bound is only a guard against looping forever.
        let mut budget = (self.total + 1) * (racks + 1) * 2;
        let mut spend = || {
            budget = budget.saturating_sub(1);
            if budget == 0 {
                Err(PlacementError::TooFewBrokers {
                    replication_factor,
                    brokers: self.total,
                })
            } else {
                Ok(())
            }
        };
        let epoch = self.epoch;
        let mut replicas = Vec::with_capacity(replication_factor as usize);
        let mut leader_rack = self.offset;
        loop {
            spend()?;
            let broker = self
                .racks
                .get_mut(leader_rack)
                .and_then(|rack| rack.unfenced.next(epoch));
            if let Some(broker) = broker {
                replicas.push(broker);
                break;
            }
            leader_rack = (leader_rack + 1) % racks;
        }
        let mut first_rack = Some(leader_rack);
        let mut rack_index = self.offset;
        for _ in 1..replication_factor {
            loop {
                spend()?;
                let broker = if first_rack == Some(rack_index) {
                    // The leader's rack is skipped once, so followers land on other racks.
                    first_rack = None;
                    None
                } else {
                    self.racks
                        .get_mut(rack_index)
                        .and_then(|rack| rack.next(epoch))
                };
                rack_index = (rack_index + 1) % racks;
                if let Some(broker) = broker {
                    replicas.push(broker);
                    break;
                }
            }
        }
        self.epoch += 1;
        self.offset += 1;
        Ok(replicas)
    }
}

/// Places `num_partitions` partitions of `replication_factor` replicas over `brokers`; the
/// first replica of each partition is an unfenced broker and is the preferred leader.
pub fn place(
    brokers: &[BrokerView],
    num_partitions: usize,
    replication_factor: i32,
    rng: &mut dyn RngCore,
) -> Result<Vec<Vec<i32>>, PlacementError> {
    let mut racks = RackList::new(brokers, rng);
    racks.check(replication_factor)?;
    (0..num_partitions)
        .map(|_| racks.place(replication_factor, rng))
        .collect()
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::controller::logic::testing::{broker, CountingRng};

    fn brokers(specs: &[(i32, Option<&str>, bool)]) -> Vec<BrokerView> {
        specs
            .iter()
            .map(|(id, rack, fenced)| {
                let mut b = broker(*id, *rack);
                b.fenced = *fenced;
                b
            })
            .collect()
    }

    #[test]
    fn errors_have_kafkas_messages() {
        let three = brokers(&[(1, None, false), (2, None, false), (3, None, true)]);
        let mut rng = CountingRng::default();
        assert_eq!(
            place(&three, 1, 4, &mut rng).map_err(|e| e.to_string()),
            Err("The target replication factor of 4 cannot be reached because only 3 broker(s) are registered.".into())
        );
        assert_eq!(
            place(&three, 1, 0, &mut rng).map_err(|e| e.to_string()),
            Err("Invalid replication factor 0: the replication factor must be positive.".into())
        );
        let fenced = brokers(&[(1, None, true)]);
        assert_eq!(
            place(&fenced, 1, 1, &mut rng).map_err(|e| e.to_string()),
            Err("All brokers are currently fenced.".into())
        );
        assert_eq!(
            place(&[], 1, 1, &mut rng).map_err(|e| e.to_string()),
            Err("All brokers are currently fenced.".into())
        );
    }

    #[test]
    fn controlled_shutdown_brokers_are_not_usable() {
        let mut list = brokers(&[(1, None, false), (2, None, false)]);
        list[1].in_controlled_shutdown = true;
        let mut rng = CountingRng::default();
        assert_eq!(
            place(&list, 1, 2, &mut rng),
            Err(PlacementError::TooFewBrokers {
                replication_factor: 2,
                brokers: 1
            })
        );
        assert_eq!(place(&list, 2, 1, &mut rng), Ok(vec![vec![1], vec![1]]));
    }

    #[test]
    fn stripes_leaders_and_followers_without_racks() {
        let list = brokers(&[(1, None, false), (2, None, false), (3, None, false)]);
        let mut rng = CountingRng::default();
        assert_eq!(
            place(&list, 3, 3, &mut rng),
            Ok(vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]])
        );
    }

    #[test]
    fn spreads_replicas_across_racks() {
        let list = brokers(&[
            (1, Some("a"), false),
            (2, Some("a"), false),
            (3, Some("b"), false),
            (4, Some("b"), false),
        ]);
        let mut rng = CountingRng::default();
        let placed = place(&list, 4, 2, &mut rng).expect("placed");
        let rack = |id: i32| if id <= 2 { "a" } else { "b" };
        for replicas in &placed {
            assert_ne!(rack(replicas[0]), rack(replicas[1]), "{placed:?}");
        }
        // Each rack's list advances once per partition, so with two racks of two the racks
        // alternate as leader rack (as Kafka's placer does from the same offsets).
        assert_eq!(placed, vec![vec![1, 3], vec![4, 2], vec![1, 3], vec![4, 2]]);
    }

    #[test]
    fn six_brokers_in_three_racks_share_leaders_and_replicas_evenly() {
        let list = brokers(&[
            (1, Some("a"), false),
            (2, Some("a"), false),
            (3, Some("b"), false),
            (4, Some("b"), false),
            (5, Some("c"), false),
            (6, Some("c"), false),
        ]);
        let rack = |id: i32| (id + 1) / 2;
        let mut rng = CountingRng::default();
        let placed = place(&list, 600, 3, &mut rng).expect("placed");
        for replicas in &placed {
            let racks: std::collections::BTreeSet<i32> =
                replicas.iter().map(|id| rack(*id)).collect();
            assert_eq!(
                racks.len(),
                3,
                "every partition spans the three racks: {replicas:?}"
            );
        }
        let leaders: Vec<usize> = (1..=6)
            .map(|id| placed.iter().filter(|r| r[0] == id).count())
            .collect();
        let replicas: Vec<usize> = (1..=6)
            .map(|id| placed.iter().flatten().filter(|b| **b == id).count())
            .collect();
        assert_eq!(leaders, vec![100; 6], "leaders per broker");
        assert_eq!(replicas, vec![300; 6], "replicas per broker");
    }

    #[test]
    fn fenced_brokers_are_followers_only() {
        let list = brokers(&[(1, None, false), (2, None, true)]);
        let mut rng = CountingRng::default();
        let placed = place(&list, 3, 2, &mut rng).expect("placed");
        assert!(placed.iter().all(|r| r[0] == 1 && r[1] == 2), "{placed:?}");
    }
}
