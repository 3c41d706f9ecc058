//! A classic member's JoinGroup protocols, kept as its request listed them.
//!
//! A protocol is a few bytes on the wire (a name and its metadata) but a decoded struct of
//! about 90, and a member keeps its protocols while it is in the group: a JoinGroup listing a
//! million distinct protocols cost 12-17 times its frame (issue #11). Here they stay in the
//! bytes of their request (a slice of the frame, or, for a decoded request, one buffer in the
//! same layout), with one offset per protocol ordered by name, so a member can be asked
//! whether it supports a name, and for a name's metadata, by binary search. Kafka keeps the
//! request's `JoinGroupRequestProtocolCollection` whole; the answers are the same.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

/// A member's protocols in request order.
#[derive(Clone, Default)]
pub struct Protocols {
    /// The protocols in their request's layout: `flexible` (compact lengths, tagged fields)
    /// or not (an i16 name length, an i32 metadata length).
    list: Bytes,
    flexible: bool,
    /// How many protocols `list` holds.
    count: usize,
    /// Each protocol's offset in `list`, ordered by name, then by offset.
    by_name: Vec<u32>,
}

impl Protocols {
    /// Reads `count` protocols from `buf` (a JoinGroup request body where its protocols
    /// start, `flexible` from v6), leaving `buf` after them. No name or metadata may be null,
    /// as the crate's decoder requires; a name that is not UTF-8 is read as Kafka's
    /// `readString` reads it, invalid bytes replaced by U+FFFD.
    pub fn read(buf: &mut Bytes, count: usize, flexible: bool) -> Result<Self, String> {
        // Each protocol is at least four bytes on the wire: the offsets never outgrow it.
        let mut by_name = Vec::with_capacity(count.min(buf.len() / 4));
        let mut at = 0;
        let mut all_utf8 = true;
        for _ in 0..count {
            let offset = u32::try_from(at).map_err(|_| "a frame over 4 GiB".to_owned())?;
            let (name, _, end) = parse(buf, at, flexible)?;
            all_utf8 &= std::str::from_utf8(&buf[name]).is_ok();
            by_name.push(offset);
            at = end;
        }
        let list = buf.split_to(at);
        if !all_utf8 {
            return Ok(Self::with_names_replaced(&list, &by_name, flexible));
        }
        let mut protocols = Protocols {
            list,
            flexible,
            count,
            by_name,
        };
        protocols.order_by_name();
        Ok(protocols)
    }

    /// The protocols `pairs` lists, as (name, metadata).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Self {
        let mut list = BytesMut::new();
        let mut by_name = Vec::new();
        for (name, metadata) in pairs {
            by_name.push(u32::try_from(list.len()).unwrap_or(u32::MAX));
            put_compact(&mut list, name.as_bytes());
            put_compact(&mut list, metadata);
            // No tagged fields.
            list.put_u8(0);
        }
        let mut protocols = Protocols {
            list: list.freeze(),
            flexible: true,
            count: by_name.len(),
            by_name,
        };
        protocols.order_by_name();
        protocols
    }

    /// The protocols of a request `list` (offsets in request order) rewritten with each name
    /// made UTF-8 as Kafka reads it; a hostile request's path only.
    fn with_names_replaced(list: &[u8], offsets: &[u32], flexible: bool) -> Self {
        let pairs: Vec<(String, &[u8])> = offsets
            .iter()
            .filter_map(|offset| parse(list, *offset as usize, flexible).ok())
            .map(|(name, metadata, _)| {
                (
                    kafka_protocol::protocol::java_utf8_lossy(&list[name]),
                    &list[metadata],
                )
            })
            .collect();
        Self::from_pairs(
            pairs
                .iter()
                .map(|(name, metadata)| (name.as_str(), *metadata)),
        )
    }

    fn order_by_name(&mut self) {
        let mut by_name = std::mem::take(&mut self.by_name);
        by_name.sort_unstable_by(|a, b| self.name_at(*a).cmp(self.name_at(*b)).then(a.cmp(b)));
        self.by_name = by_name;
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Each protocol's name and metadata, in request order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Bytes)> + '_ {
        let mut at = 0;
        (0..self.count).map(move |_| {
            let (name, metadata, end) = self.ranges_at(at);
            at = end;
            (self.text(name), self.list.slice(metadata))
        })
    }

    /// Each protocol's name, in request order.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(|(name, _)| name)
    }

    /// Where the first protocol named `name` is in `by_name`, if any.
    fn position(&self, name: &str) -> Option<usize> {
        let at = self
            .by_name
            .partition_point(|offset| self.name_at(*offset) < name);
        let offset = self.by_name.get(at)?;
        (self.name_at(*offset) == name).then_some(at)
    }

    /// Whether a protocol is named `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// The metadata of the first protocol named `name`.
    pub fn metadata(&self, name: &str) -> Option<Bytes> {
        let offset = *self.by_name.get(self.position(name)?)?;
        let (_, metadata, _) = self.ranges_at(offset as usize);
        Some(self.list.slice(metadata))
    }

    /// Where the name and metadata of the protocol at `offset` are, and where it ends, in a
    /// list read whole before (so well formed).
    fn ranges_at(&self, offset: usize) -> (Range<usize>, Range<usize>, usize) {
        parse(&self.list, offset, self.flexible).unwrap_or((0..0, 0..0, self.list.len()))
    }

    /// The name of the protocol at `offset`, read without the rest of it (the sort by name
    /// reads names only).
    fn name_at(&self, offset: u32) -> &str {
        let mut at = offset as usize;
        let length = if self.flexible {
            uvarint(&self.list, &mut at).map_or(0, |length| length.saturating_sub(1) as usize)
        } else {
            fixed::<2>(&self.list, &mut at)
                .map_or(0, |length| i16::from_be_bytes(length).max(0) as usize)
        };
        self.text(at..at + length)
    }

    /// A name checked to be UTF-8 when the list was read.
    fn text(&self, range: Range<usize>) -> &str {
        self.list
            .get(range)
            .and_then(|name| std::str::from_utf8(name).ok())
            .unwrap_or_default()
    }
}

/// The protocol names every one of `members` supports, found once: the distinct names of the
/// member with the fewest protocols that each other member names too (all of them, without a
/// copy, for a member alone).
pub struct CommonProtocols<'a> {
    fewest: Option<&'a Protocols>,
    /// Offsets into `fewest`'s list of the common names, ordered by name; `None` when
    /// `fewest` is the only member.
    common: Option<Vec<u32>>,
}

impl<'a> CommonProtocols<'a> {
    pub fn of(members: &[&'a Protocols]) -> Self {
        let fewest = members.iter().min_by_key(|p| p.len()).copied();
        let common = match (fewest, members.len()) {
            (Some(fewest), 2..) => {
                let mut common: Vec<u32> = Vec::new();
                for offset in &fewest.by_name {
                    let name = fewest.name_at(*offset);
                    let repeat = common
                        .last()
                        .is_some_and(|last| fewest.name_at(*last) == name);
                    if !repeat && members.iter().all(|member| member.contains(name)) {
                        common.push(*offset);
                    }
                }
                Some(common)
            }
            _ => None,
        };
        CommonProtocols { fewest, common }
    }

    /// Whether every member supports `name`.
    pub fn contains(&self, name: &str) -> bool {
        match (self.fewest, &self.common) {
            (None, _) => false,
            (Some(alone), None) => alone.contains(name),
            (Some(fewest), Some(common)) => common
                .binary_search_by(|offset| fewest.name_at(*offset).cmp(name))
                .is_ok(),
        }
    }
}

/// Parses the protocol at `at` of `list`: where its name and metadata are, and where it ends.
fn parse(
    list: &[u8],
    mut at: usize,
    flexible: bool,
) -> Result<(Range<usize>, Range<usize>, usize), String> {
    let length = |at: &mut usize, wide: bool| -> Result<usize, String> {
        let length = if flexible {
            i64::from(uvarint(list, at)?) - 1
        } else if wide {
            i64::from(i32::from_be_bytes(fixed(list, at)?))
        } else {
            i64::from(i16::from_be_bytes(fixed(list, at)?))
        };
        usize::try_from(length).map_err(|_| "a null JoinGroup protocol field".to_owned())
    };
    let name_length = length(&mut at, false)?;
    let name = at..at + name_length;
    at = skip(list, at, name_length)?;
    let metadata_length = length(&mut at, true)?;
    let metadata = at..at + metadata_length;
    at = skip(list, at, metadata_length)?;
    if flexible {
        for _ in 0..uvarint(list, &mut at)? {
            uvarint(list, &mut at)?;
            let size = uvarint(list, &mut at)? as usize;
            at = skip(list, at, size)?;
        }
    }
    Ok((name, metadata, at))
}

fn skip(list: &[u8], at: usize, n: usize) -> Result<usize, String> {
    match at.checked_add(n) {
        Some(end) if end <= list.len() => Ok(end),
        _ => Err(format!(
            "truncated: {n} bytes needed, {} left",
            list.len().saturating_sub(at)
        )),
    }
}

fn fixed<const N: usize>(list: &[u8], at: &mut usize) -> Result<[u8; N], String> {
    let end = skip(list, *at, N)?;
    let mut bytes = [0u8; N];
    bytes.copy_from_slice(&list[*at..end]);
    *at = end;
    Ok(bytes)
}

fn uvarint(list: &[u8], at: &mut usize) -> Result<u32, String> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        let [byte] = fixed::<1>(list, at)?;
        value |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("a varint longer than 5 bytes".to_owned())
}

fn put_compact(buf: &mut BytesMut, bytes: &[u8]) {
    crate::wire::put_uvarint(buf, u32::try_from(bytes.len() + 1).unwrap_or(u32::MAX));
    buf.put_slice(bytes);
}

impl PartialEq for Protocols {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for Protocols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names().take(8)).finish()?;
        if self.count > 8 {
            write!(f, " and {} more", self.count - 8)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs() -> Vec<(String, Vec<u8>)> {
        vec![
            ("range".into(), b"r1".to_vec()),
            ("cooperative-sticky".into(), b"c".to_vec()),
            ("range".into(), b"r2".to_vec()),
            (String::new(), Vec::new()),
        ]
    }

    fn of(pairs: &[(String, Vec<u8>)]) -> Protocols {
        Protocols::from_pairs(pairs.iter().map(|(n, m)| (n.as_str(), m.as_slice())))
    }

    #[test]
    fn protocols_are_listed_in_order_and_found_by_name() {
        let protocols = of(&pairs());
        let listed: Vec<(String, Vec<u8>)> = protocols
            .iter()
            .map(|(name, metadata)| (name.to_owned(), metadata.to_vec()))
            .collect();
        assert_eq!(listed, pairs());
        assert_eq!(protocols.metadata("range").as_deref(), Some(&b"r1"[..]));
        assert_eq!(protocols.metadata("").as_deref(), Some(&b""[..]));
        assert!(protocols.contains("cooperative-sticky"));
        assert!(!protocols.contains("sticky"));
        assert_eq!(protocols.metadata("sticky"), None);
    }

    #[test]
    fn the_wire_layouts_read_as_their_pairs() {
        for flexible in [false, true] {
            let mut wire = BytesMut::new();
            for (name, metadata) in pairs() {
                if flexible {
                    put_compact(&mut wire, name.as_bytes());
                    put_compact(&mut wire, &metadata);
                    wire.put_u8(0);
                } else {
                    wire.put_i16(name.len() as i16);
                    wire.put_slice(name.as_bytes());
                    wire.put_i32(metadata.len() as i32);
                    wire.put_slice(&metadata);
                }
            }
            wire.put_slice(b"after");
            let mut buf = wire.freeze();
            let protocols = Protocols::read(&mut buf, 4, flexible).unwrap();
            assert_eq!(&buf[..], b"after");
            assert_eq!(protocols, of(&pairs()));
            assert_eq!(protocols.metadata("range").as_deref(), Some(&b"r1"[..]));
            let mut short = Bytes::from_static(b"\x00\x05ran");
            assert!(Protocols::read(&mut short, 1, false).is_err());
            let mut null = Bytes::from_static(b"\xff\xff");
            assert!(Protocols::read(&mut null, 1, false).is_err());
        }
    }

    #[test]
    fn a_name_that_is_not_utf8_reads_as_kafka_reads_it() {
        let mut wire =
            Bytes::from_static(b"\x00\x02r\xff\x00\x00\x00\x01m\x00\x01a\x00\x00\x00\x00");
        let protocols = Protocols::read(&mut wire, 2, false).unwrap();
        assert!(wire.is_empty());
        assert_eq!(
            protocols,
            Protocols::from_pairs([("r\u{fffd}", &b"m"[..]), ("a", &b""[..])])
        );
        assert_eq!(protocols.metadata("r\u{fffd}").as_deref(), Some(&b"m"[..]));
    }

    #[test]
    fn common_protocols_are_those_every_member_names() {
        let first = of(&pairs());
        let second = Protocols::from_pairs([("range", &b""[..]), ("sticky", &b""[..])]);
        let common = CommonProtocols::of(&[&first, &second]);
        assert!(common.contains("range"));
        assert!(!common.contains("sticky"));
        assert!(!common.contains("cooperative-sticky"));
        assert!(!CommonProtocols::of(&[]).contains("range"));
    }
}
