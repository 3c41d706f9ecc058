//! Partition ids written as runs of consecutive ids (`0-999`, `3,7-9,11`): one log line can
//! then name every partition of a 1,000-partition topic a change touched.

use std::fmt;

/// Partition ids in the order they were added, kept as runs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PartitionRuns {
    count: usize,
    runs: Vec<(i32, i32)>,
}

impl PartitionRuns {
    pub fn add(&mut self, partition: i32) {
        self.count += 1;
        match self.runs.last_mut() {
            Some((_, last)) if last.checked_add(1) == Some(partition) => *last = partition,
            _ => self.runs.push((partition, partition)),
        }
    }

    /// How many ids were added.
    pub fn count(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

impl fmt::Display for PartitionRuns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, run) in self.runs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write_span(f, *run)?;
        }
        Ok(())
    }
}

/// `first` alone when the span holds one value, else `first-last`.
pub fn write_span(f: &mut impl fmt::Write, (first, last): (i32, i32)) -> fmt::Result {
    if first == last {
        write!(f, "{first}")
    } else {
        write!(f, "{first}-{last}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_ids_are_written_as_runs() {
        let mut runs = PartitionRuns::default();
        assert!(runs.is_empty());
        assert_eq!(runs.to_string(), "");
        for partition in 0..1000 {
            runs.add(partition);
        }
        assert_eq!(runs.to_string(), "0-999");
        let mut runs = PartitionRuns::default();
        for partition in [3, 7, 8, 9, 11, 10] {
            runs.add(partition);
        }
        assert_eq!(runs.count(), 6);
        assert_eq!(runs.to_string(), "3,7-9,11,10");
        let mut runs = PartitionRuns::default();
        runs.add(i32::MAX);
        runs.add(i32::MIN);
        assert_eq!(runs.to_string(), "2147483647,-2147483648");
    }
}
