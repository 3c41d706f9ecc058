//! AddRaftVoter v1-v2 and RemoveRaftVoter v1, which the kafka-protocol crate (0.18, v0 only)
//! cannot encode, written on its primitives without touching the vendored crate.
//!
//! Wire facts (Kafka's JSON, KIP-853, KAFKA-19400, KAFKA-18775):
//! * AddRaftVoter request v1 appends `AckWhenCommitted` (bool, default true) to the v0 fields;
//!   v2 has the same layout as v1 and changes meaning only (zero directory id / empty
//!   listeners ask the leader to derive them).
//! * RemoveRaftVoter request v1 has the v0 layout (a zero directory id means "the current
//!   voter with that id").
//! * Both responses are identical in every version.
//!
//! So every version decodes into the crate's v0 struct (`AckWhenCommitted` is read and dropped:
//! Gregor answers once the voter change is committed whatever it says, which is the stronger
//! promise), and responses are encoded with the v0 layout. [`AddRaftVoterRequestV`] and
//! [`RemoveRaftVoterRequestV`] implement the crate's traits so the admin client sends them at
//! any version like any other request.

use anyhow::bail;
use bytes::{Buf, Bytes};
use gregor_actors::handlers::raft_voters::VoterListeners;
use gregor_actors::wire::put_uvarint;
use kafka_protocol::messages::add_raft_voter_request::Listener;
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, ApiKey, RemoveRaftVoterRequest,
    RemoveRaftVoterResponse, RequestKind,
};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, Message, Request, StrBytes, VersionRange,
};

// The crate keeps its field encoders private; these are the few primitives the v1/v2 layouts
// need, per Kafka's protocol guide (unsigned varints, compact strings and arrays), besides
// `gregor_actors::wire`'s.

fn get_uvarint<B: ByteBuf>(buf: &mut B) -> anyhow::Result<u32> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        if !buf.has_remaining() {
            bail!("truncated varint");
        }
        let byte = buf.get_u8();
        value |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    bail!("varint longer than 5 bytes")
}

fn put_compact_nullable_string<B: ByteBufMut>(
    buf: &mut B,
    value: &Option<StrBytes>,
) -> anyhow::Result<()> {
    match value {
        None => put_uvarint(buf, 0),
        Some(text) => {
            let len = u32::try_from(text.len() + 1)?;
            put_uvarint(buf, len);
            buf.put_slice(text.as_bytes());
        }
    }
    Ok(())
}

fn get_compact_nullable_string<B: ByteBuf>(buf: &mut B) -> anyhow::Result<Option<StrBytes>> {
    match get_uvarint(buf)? {
        0 => Ok(None),
        n => {
            let bytes = buf.try_get_bytes(n as usize - 1)?;
            Ok(Some(StrBytes::from_utf8_lossy(bytes)))
        }
    }
}

fn need<B: ByteBuf>(buf: &B, n: usize) -> anyhow::Result<()> {
    if buf.remaining() < n {
        bail!("truncated: {n} bytes needed, {} left", buf.remaining());
    }
    Ok(())
}

/// AddRaftVoter versions Gregor serves.
pub const ADD_RAFT_VOTER_VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };
/// RemoveRaftVoter versions Gregor serves.
pub const REMOVE_RAFT_VOTER_VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// Decodes the body of a request of `key` at `version` when the crate cannot; `None` for
/// everything the crate decodes itself.
pub fn decode<B: ByteBuf>(
    key: ApiKey,
    buf: &mut B,
    version: i16,
) -> Option<anyhow::Result<RequestKind>> {
    match (key, version) {
        (ApiKey::AddRaftVoter, 1..=2) => Some(
            AddRaftVoterRequestV::decode(buf, version)
                .map(|r| RequestKind::AddRaftVoter(r.request)),
        ),
        (ApiKey::RemoveRaftVoter, 1) => {
            Some(RemoveRaftVoterRequest::decode(buf, 0).map(RequestKind::RemoveRaftVoter))
        }
        _ => None,
    }
}

/// AddRaftVoter requests listing more listeners than this keep them in their frame.
pub const LISTENERS_DECODED: usize = 1024;

/// An AddRaftVoter request whose listeners stay in its frame: a decoded listener costs ten
/// times its few bytes on the wire (issue #11), and the handler reads them one at a time.
#[derive(Clone, Debug)]
pub struct FramedAddVoter {
    /// The request without its listeners.
    pub request: AddRaftVoterRequest,
    /// The listeners, from the first on.
    listeners: Bytes,
    count: usize,
}

/// Reads `body` (an AddRaftVoter request body) when it lists more than [`LISTENERS_DECODED`]
/// listeners; `None` for other requests, decoded whole. The request is read to its end first,
/// so a malformed one is refused whole, as the decoder refuses it.
pub fn scan_add_voter(body: &Bytes, version: i16) -> Option<anyhow::Result<FramedAddVoter>> {
    if !(0..=2).contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let prefix = (|| {
        let cluster_id = get_compact_nullable_string(&mut rest)?;
        need(&rest, 24)?;
        let timeout_ms = rest.get_i32();
        let voter_id = rest.get_i32();
        let voter_directory_id = uuid::Uuid::from_slice(&rest.split_to(16))?;
        let count = get_uvarint(&mut rest)?;
        anyhow::Ok((cluster_id, timeout_ms, voter_id, voter_directory_id, count))
    })();
    let (cluster_id, timeout_ms, voter_id, voter_directory_id, count) = prefix.ok()?;
    let count = (count as usize).checked_sub(1)?;
    if count <= LISTENERS_DECODED {
        return None;
    }
    Some((|| {
        let start = rest.clone();
        for _ in 0..count {
            read_listener(&mut rest)?;
        }
        let listeners = start.slice(..start.len() - rest.len());
        if version >= 1 {
            need(&rest, 1)?;
            rest.advance(1);
        }
        skip_tagged_fields(&mut rest)?;
        Ok(FramedAddVoter {
            request: AddRaftVoterRequest::default()
                .with_cluster_id(cluster_id)
                .with_timeout_ms(timeout_ms)
                .with_voter_id(voter_id)
                .with_voter_directory_id(voter_directory_id),
            listeners,
            count,
        })
    })())
}

/// Reads one listener: a UTF-8 name and host, a port and tagged fields.
fn read_listener(buf: &mut Bytes) -> anyhow::Result<(StrBytes, StrBytes, u16)> {
    let mut string = |what: &str| match get_compact_nullable_string(buf)? {
        Some(value) => Ok(value),
        None => bail!("an AddRaftVoter listener {what} must not be null"),
    };
    let name = string("name")?;
    let host = string("host")?;
    need(buf, 2)?;
    let port = buf.get_u16();
    skip_tagged_fields(buf)?;
    Ok((name, host, port))
}

fn skip_tagged_fields<B: ByteBuf>(buf: &mut B) -> anyhow::Result<()> {
    let tagged = get_uvarint(buf)?;
    for _ in 0..tagged {
        let _tag = get_uvarint(buf)?;
        let size = get_uvarint(buf)?;
        buf.try_get_bytes(size as usize)?;
    }
    Ok(())
}

impl VoterListeners for FramedAddVoter {
    fn count(&self) -> usize {
        self.count
    }

    fn each(&self, visit: &mut dyn FnMut(&str, &str, u16) -> bool) -> Result<(), String> {
        let mut rest = self.listeners.clone();
        for _ in 0..self.count {
            let (name, host, port) = read_listener(&mut rest).map_err(|e| e.to_string())?;
            if !visit(&name, &host, port) {
                break;
            }
        }
        Ok(())
    }
}

/// The version whose layout encodes a response of `key` at `version`.
pub(crate) fn response_layout(key: ApiKey, version: i16) -> i16 {
    match key {
        ApiKey::AddRaftVoter | ApiKey::RemoveRaftVoter => 0,
        _ => version,
    }
}

/// AddRaftVoter at any version 0-2.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AddRaftVoterRequestV {
    /// The v0 fields.
    pub request: AddRaftVoterRequest,
    /// v1+: answer once committed (true) or once appended (false).
    pub ack_when_committed: bool,
}

impl Message for AddRaftVoterRequestV {
    const VERSIONS: VersionRange = ADD_RAFT_VOTER_VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl HeaderVersion for AddRaftVoterRequestV {
    fn header_version(_version: i16) -> i16 {
        2
    }
}

impl Request for AddRaftVoterRequestV {
    const KEY: i16 = ApiKey::AddRaftVoter as i16;
    type Response = RaftVoterResponseV<AddRaftVoterResponse>;
}

impl Encodable for AddRaftVoterRequestV {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
        if !(0..=2).contains(&version) {
            bail!("AddRaftVoter v{version} is not supported");
        }
        let r = &self.request;
        put_compact_nullable_string(buf, &r.cluster_id)?;
        buf.put_i32(r.timeout_ms);
        buf.put_i32(r.voter_id);
        buf.put_slice(r.voter_directory_id.as_bytes());
        put_uvarint(buf, u32::try_from(r.listeners.len() + 1)?);
        for listener in &r.listeners {
            listener.encode(buf, 0)?;
        }
        if version >= 1 {
            buf.put_u8(u8::from(self.ack_when_committed));
        }
        // No tagged fields.
        put_uvarint(buf, 0);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        let mut scratch = bytes::BytesMut::new();
        self.encode(&mut scratch, version)?;
        Ok(scratch.len())
    }
}

impl Decodable for AddRaftVoterRequestV {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> anyhow::Result<Self> {
        if !(0..=2).contains(&version) {
            bail!("AddRaftVoter v{version} is not supported");
        }
        let cluster_id = get_compact_nullable_string(buf)?;
        need(buf, 24)?;
        let timeout_ms = buf.get_i32();
        let voter_id = buf.get_i32();
        let mut directory = [0u8; 16];
        buf.copy_to_slice(&mut directory);
        let voter_directory_id = uuid::Uuid::from_bytes(directory);
        let count = get_uvarint(buf)?;
        if count == 0 {
            bail!("AddRaftVoter listeners must not be null");
        }
        // Each listener takes at least 5 bytes: never trust the count for an allocation.
        let mut listeners = Vec::with_capacity((count as usize - 1).min(buf.remaining() / 5));
        for _ in 1..count {
            listeners.push(Listener::decode(buf, 0)?);
        }
        let ack_when_committed = if version >= 1 {
            need(buf, 1)?;
            buf.get_u8() != 0
        } else {
            true
        };
        skip_tagged_fields(buf)?;
        Ok(AddRaftVoterRequestV {
            request: AddRaftVoterRequest::default()
                .with_cluster_id(cluster_id)
                .with_timeout_ms(timeout_ms)
                .with_voter_id(voter_id)
                .with_voter_directory_id(voter_directory_id)
                .with_listeners(listeners),
            ack_when_committed,
        })
    }
}

/// RemoveRaftVoter at any version 0-1.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RemoveRaftVoterRequestV(pub RemoveRaftVoterRequest);

impl Message for RemoveRaftVoterRequestV {
    const VERSIONS: VersionRange = REMOVE_RAFT_VOTER_VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl HeaderVersion for RemoveRaftVoterRequestV {
    fn header_version(_version: i16) -> i16 {
        2
    }
}

impl Request for RemoveRaftVoterRequestV {
    const KEY: i16 = ApiKey::RemoveRaftVoter as i16;
    type Response = RaftVoterResponseV<RemoveRaftVoterResponse>;
}

impl Encodable for RemoveRaftVoterRequestV {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
        if !(0..=1).contains(&version) {
            bail!("RemoveRaftVoter v{version} is not supported");
        }
        self.0.encode(buf, 0)
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        if !(0..=1).contains(&version) {
            bail!("RemoveRaftVoter v{version} is not supported");
        }
        self.0.compute_size(0)
    }
}

impl Decodable for RemoveRaftVoterRequestV {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> anyhow::Result<Self> {
        if !(0..=1).contains(&version) {
            bail!("RemoveRaftVoter v{version} is not supported");
        }
        Ok(RemoveRaftVoterRequestV(RemoveRaftVoterRequest::decode(
            buf, 0,
        )?))
    }
}

/// A voter-change response at any version: every version has the v0 layout.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RaftVoterResponseV<R>(pub R);

impl<R> Message for RaftVoterResponseV<R> {
    const VERSIONS: VersionRange = ADD_RAFT_VOTER_VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl<R> HeaderVersion for RaftVoterResponseV<R> {
    fn header_version(_version: i16) -> i16 {
        1
    }
}

impl<R: Encodable> Encodable for RaftVoterResponseV<R> {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> anyhow::Result<()> {
        self.0.encode(buf, 0)
    }

    fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
        self.0.compute_size(0)
    }
}

impl<R: Decodable> Decodable for RaftVoterResponseV<R> {
    fn decode<B: ByteBuf>(buf: &mut B, _version: i16) -> anyhow::Result<Self> {
        Ok(RaftVoterResponseV(R::decode(buf, 0)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> AddRaftVoterRequest {
        AddRaftVoterRequest::default()
            .with_cluster_id(Some(StrBytes::from_static_str("abc")))
            .with_timeout_ms(30_000)
            .with_voter_id(4)
            .with_voter_directory_id(uuid::Uuid::from_u128(9))
            .with_listeners(vec![Listener::default()
                .with_name(StrBytes::from_static_str("CONTROLLER"))
                .with_host(StrBytes::from_static_str("localhost"))
                .with_port(9093)])
    }

    #[test]
    fn v0_matches_the_crate_and_v1_appends_one_byte() -> anyhow::Result<()> {
        let mut crate_v0 = bytes::BytesMut::new();
        request().encode(&mut crate_v0, 0)?;
        let ours = AddRaftVoterRequestV {
            request: request(),
            ack_when_committed: false,
        };
        let mut v0 = bytes::BytesMut::new();
        ours.encode(&mut v0, 0)?;
        assert_eq!(v0, crate_v0);
        let mut v2 = bytes::BytesMut::new();
        ours.encode(&mut v2, 2)?;
        assert_eq!(v2.len(), v0.len() + 1);
        // The boolean sits just before the (empty) tagged-field count.
        assert_eq!(&v2[..v0.len() - 1], &v0[..v0.len() - 1]);
        assert_eq!(v2[v0.len() - 1], 0);
        let decoded = AddRaftVoterRequestV::decode(&mut v2.freeze(), 2)?;
        assert_eq!(decoded, ours);
        let decoded = AddRaftVoterRequestV::decode(&mut v0.freeze(), 0)?;
        assert!(decoded.ack_when_committed);
        assert!(AddRaftVoterRequestV::default()
            .encode(&mut bytes::BytesMut::new(), 3)
            .is_err());
        Ok(())
    }

    #[test]
    fn front_end_decodes_missing_versions_only() -> anyhow::Result<()> {
        let mut v1 = bytes::BytesMut::new();
        RemoveRaftVoterRequestV(RemoveRaftVoterRequest::default().with_voter_id(3))
            .encode(&mut v1, 1)?;
        let mut frozen = v1.clone().freeze();
        match decode(ApiKey::RemoveRaftVoter, &mut frozen, 1) {
            Some(Ok(RequestKind::RemoveRaftVoter(r))) => assert_eq!(r.voter_id, 3),
            other => panic!("{other:?}"),
        }
        assert!(decode(ApiKey::RemoveRaftVoter, &mut v1.freeze(), 0).is_none());
        assert_eq!(response_layout(ApiKey::AddRaftVoter, 2), 0);
        assert_eq!(response_layout(ApiKey::Metadata, 12), 12);
        Ok(())
    }

    /// `count` listeners, their names repeating every 1,000.
    fn many(count: usize) -> Vec<Listener> {
        (0..count)
            .map(|index| {
                Listener::default()
                    .with_name(StrBytes::from_string(format!("L{}", index % 1_000)))
                    .with_host(StrBytes::from_string(format!("h{index}")))
                    .with_port(index as u16)
            })
            .collect()
    }

    fn body(listeners: Vec<Listener>, version: i16) -> anyhow::Result<Bytes> {
        let mut body = bytes::BytesMut::new();
        AddRaftVoterRequestV {
            request: request().with_listeners(listeners),
            ack_when_committed: true,
        }
        .encode(&mut body, version)?;
        Ok(body.freeze())
    }

    #[test]
    fn many_listeners_are_read_from_the_frame_as_decoded() -> anyhow::Result<()> {
        for version in 0..=2 {
            let listeners = many(1_500);
            let framed = scan_add_voter(&body(listeners.clone(), version)?, version)
                .ok_or_else(|| anyhow::anyhow!("not framed"))??;
            assert_eq!(framed.request, request().with_listeners(Vec::new()));
            assert_eq!(VoterListeners::count(&framed), 1_500);
            let mut read = Vec::new();
            framed
                .each(&mut |name, host, port| {
                    read.push((name.to_owned(), host.to_owned(), port));
                    true
                })
                .map_err(anyhow::Error::msg)?;
            let expected: Vec<(String, String, u16)> = listeners
                .iter()
                .map(|l| (l.name.to_string(), l.host.to_string(), l.port))
                .collect();
            assert_eq!(read, expected, "v{version}");
            assert!(scan_add_voter(&body(many(1_024), version)?, version).is_none());
        }
        Ok(())
    }

    #[test]
    fn a_malformed_framed_request_is_refused_whole() -> anyhow::Result<()> {
        let whole = body(many(1_500), 2)?;
        let short = whole.slice(..whole.len() - 4);
        assert!(scan_add_voter(&short, 2).is_some_and(|scanned| scanned.is_err()));
        let mut bad = bytes::BytesMut::from(&whole[..]);
        let at = bad
            .windows(5)
            .position(|w| w == b"h1234")
            .ok_or_else(|| anyhow::anyhow!("no such host"))?;
        bad[at] = 0xff;
        // Not UTF-8 is not malformed: read as Kafka's `readString` reads it.
        assert!(scan_add_voter(&bad.freeze(), 2).is_some_and(|scanned| scanned.is_ok()));
        Ok(())
    }
}
