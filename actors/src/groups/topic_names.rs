//! A consumer member's subscribed topic names (KIP-848), kept in the bytes they came in.
//!
//! A name is a few bytes on the wire but a `String` of 24 bytes and its own allocation, and
//! the coordinator kept several copies (the member's, the record value's, the one compared
//! before a change): a heartbeat subscribing to a million distinct names cost 25 times its
//! frame (issue #11). Here the names stay in one buffer of compact strings (a slice of the
//! request frame, of a record, or built once for a decoded request) with one offset per
//! distinct name in name order, shared by every copy (`Arc`): a clone costs nothing, and
//! "does the member subscribe to this topic" is a binary search. The set is what Kafka keeps
//! (its member's `subscribedTopicNames`, a set); the order of iteration is the names'.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

/// Distinct topic names, in name order.
#[derive(Clone, Default)]
pub struct TopicNames {
    /// Compact strings (a length + 1 as an unsigned varint, then the bytes).
    list: Bytes,
    /// The offset in `list` of each distinct name, ordered by name (a `Vec` moved into its
    /// `Arc`, never copied).
    sorted: Arc<Vec<u32>>,
}

impl TopicNames {
    /// Reads `count` compact strings from `buf` (a name list where its names start), leaving
    /// `buf` after them. No name may be null, as the crate's decoder requires; a name that is
    /// not UTF-8 is read as Kafka's `readString` reads it, invalid bytes replaced by U+FFFD.
    pub fn read(buf: &mut Bytes, count: usize) -> Result<Self, String> {
        // Each name is at least a byte on the wire: the offsets never outgrow four times it.
        let mut offsets = Vec::with_capacity(count.min(buf.len()));
        let mut at = 0;
        let mut all_utf8 = true;
        for _ in 0..count {
            let offset = u32::try_from(at).map_err(|_| "a frame over 4 GiB".to_owned())?;
            let name = name_range(buf, &mut at)?.ok_or("a topic name must not be null")?;
            all_utf8 &= std::str::from_utf8(&buf[name]).is_ok();
            offsets.push(offset);
        }
        let list = buf.split_to(at);
        if !all_utf8 {
            // A hostile request's path: each name as Kafka's `readString` reads it.
            return Ok(Self::from_names(offsets.iter().filter_map(|offset| {
                let mut at = *offset as usize;
                let name = name_range(&list, &mut at).ok().flatten()?;
                Some(kafka_protocol::protocol::java_utf8_lossy(&list[name]))
            })));
        }
        Ok(Self::sorted(list, offsets))
    }

    /// The distinct names of `names`.
    pub fn from_names<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Self {
        let mut list = BytesMut::new();
        let mut offsets = Vec::new();
        for name in names {
            let name = name.as_ref().as_bytes();
            offsets.push(u32::try_from(list.len()).unwrap_or(u32::MAX));
            crate::wire::put_uvarint(&mut list, u32::try_from(name.len() + 1).unwrap_or(u32::MAX));
            list.put_slice(name);
        }
        Self::sorted(list.freeze(), offsets)
    }

    fn sorted(list: Bytes, mut offsets: Vec<u32>) -> Self {
        let mut names = TopicNames {
            list,
            sorted: Arc::default(),
        };
        offsets.sort_unstable_by(|a, b| names.name_at(*a).cmp(names.name_at(*b)));
        offsets.dedup_by(|a, b| names.name_at(*a) == names.name_at(*b));
        names.sorted = Arc::new(offsets);
        names
    }

    /// How many distinct names there are.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Each distinct name, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        self.sorted.iter().map(|offset| self.name_at(*offset))
    }

    /// Whether `name` is one of them.
    pub fn contains(&self, name: &str) -> bool {
        self.sorted
            .binary_search_by(|offset| self.name_at(*offset).cmp(name))
            .is_ok()
    }

    /// The name at `offset` of a list read whole before (so well formed).
    fn name_at(&self, offset: u32) -> &str {
        let mut at = offset as usize;
        name_range(&self.list, &mut at)
            .ok()
            .flatten()
            .and_then(|range| self.list.get(range))
            .and_then(|name| std::str::from_utf8(name).ok())
            .unwrap_or_default()
    }
}

/// Where the compact string at `at` of `list` is (`None`: null); moves `at` past it.
fn name_range(list: &[u8], at: &mut usize) -> Result<Option<std::ops::Range<usize>>, String> {
    let mut length = 0u32;
    let mut shift = 0;
    loop {
        let byte = *list.get(*at).ok_or("a truncated topic name")?;
        *at += 1;
        length |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift >= 35 {
            return Err("a varint longer than 5 bytes".to_owned());
        }
    }
    let Some(length) = (length as usize).checked_sub(1) else {
        return Ok(None);
    };
    let start = *at;
    match start.checked_add(length) {
        Some(end) if end <= list.len() => {
            *at = end;
            Ok(Some(start..end))
        }
        _ => Err("a truncated topic name".to_owned()),
    }
}

impl PartialEq for TopicNames {
    fn eq(&self, other: &Self) -> bool {
        (Arc::ptr_eq(&self.sorted, &other.sorted) && self.list == other.list)
            || (self.len() == other.len() && self.iter().eq(other.iter()))
    }
}

impl Eq for TopicNames {}

impl std::fmt::Debug for TopicNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().take(8)).finish()?;
        if self.len() > 8 {
            write!(f, " and {} more", self.len() - 8)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_once_in_name_order() {
        let names = TopicNames::from_names(["b", "a", "", "b", "c"]);
        assert_eq!(names.iter().collect::<Vec<_>>(), ["", "a", "b", "c"]);
        assert_eq!(names.len(), 4);
        assert!(names.contains("a") && names.contains("") && !names.contains("d"));
        assert_eq!(names, TopicNames::from_names(["c", "b", "a", ""]));
        assert_ne!(names, TopicNames::from_names(["c", "b", "a"]));
        assert!(TopicNames::default().is_empty());
    }

    #[test]
    fn a_wire_list_reads_as_its_names() {
        let mut buf = Bytes::from_static(b"\x02b\x02a\x02b\x01after");
        let names = TopicNames::read(&mut buf, 4).unwrap();
        assert_eq!(&buf[..], b"after");
        assert_eq!(names, TopicNames::from_names(["a", "b", ""]));
        assert!(
            TopicNames::read(&mut Bytes::from_static(b"\x00"), 1).is_err(),
            "null"
        );
        assert!(
            TopicNames::read(&mut Bytes::from_static(b"\x05ab"), 1).is_err(),
            "short"
        );
        // As Kafka's readString: invalid UTF-8 replaced, so two such names are one.
        let names = TopicNames::read(&mut Bytes::from_static(b"\x02\xff\x02\xfe\x02a"), 3).unwrap();
        assert_eq!(names, TopicNames::from_names(["a", "\u{fffd}"]));
    }
}
