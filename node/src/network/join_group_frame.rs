//! JoinGroup requests listing many protocols: the protocols stay in the frame.
//!
//! A protocol is a few bytes on the wire but a decoded struct of about 90, and the member
//! keeps its protocols while it is in the group: a JoinGroup of distinct protocols cost 12-17
//! times its frame (issue #11). A request listing more than [`PROTOCOLS_DECODED`] is read here
//! on the wire primitives: its other fields decoded, its protocols checked as the crate's
//! decoder checks them and kept as `groups::protocols::Protocols`, a slice of the frame with an
//! offset per protocol, which the coordinator keeps for the member.

use bytes::{Buf, Bytes};
use gregor_actors::groups::protocols::Protocols;
use kafka_protocol::messages::{GroupId, JoinGroupRequest};

use super::dedup_decode::{array_length, need, nullable_string, skip_tagged_fields, string};

/// JoinGroup requests listing more protocols than this keep them in their frame.
pub const PROTOCOLS_DECODED: usize = 1024;

/// The first flexible version.
const FLEXIBLE_FROM: i16 = 6;

/// A JoinGroup request whose protocols stay in its frame.
#[derive(Clone, Debug)]
pub struct FramedJoin {
    /// The request without its protocols.
    pub request: JoinGroupRequest,
    pub protocols: Protocols,
}

/// Reads `body` (a JoinGroup request body) when it lists more than [`PROTOCOLS_DECODED`]
/// protocols; `None` for other requests, decoded whole. The request is read to its end first,
/// so a malformed one is refused whole, as the crate's decoder refuses it.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<FramedJoin>> {
    if !(0..=9).contains(&version) {
        return None;
    }
    let flexible = version >= FLEXIBLE_FROM;
    let mut rest = body.clone();
    let request = read_prefix(&mut rest, version).ok()?;
    let count = array_length(&mut rest, flexible).ok()?;
    if count <= PROTOCOLS_DECODED as i64 {
        return None;
    }
    Some((|| {
        let protocols =
            Protocols::read(&mut rest, count as usize, flexible).map_err(anyhow::Error::msg)?;
        let reason = if version >= 8 {
            nullable_string(&mut rest, flexible)?
                .map(kafka_protocol::protocol::StrBytes::from_utf8_lossy)
        } else {
            None
        };
        if flexible {
            skip_tagged_fields(&mut rest)?;
        }
        Ok(FramedJoin {
            request: request.with_reason(reason),
            protocols,
        })
    })())
}

/// The fields before the protocols.
fn read_prefix(buf: &mut Bytes, version: i16) -> anyhow::Result<JoinGroupRequest> {
    let flexible = version >= FLEXIBLE_FROM;
    let group_id = string(buf, flexible, "the group id")?;
    need(buf, 4)?;
    let session_timeout_ms = buf.get_i32();
    let rebalance_timeout_ms = if version >= 1 {
        need(buf, 4)?;
        buf.get_i32()
    } else {
        -1
    };
    let member_id = string(buf, flexible, "the member id")?;
    let group_instance_id = if version >= 5 {
        super::partition_chunks::nullable_str(buf, flexible)?
    } else {
        None
    };
    let protocol_type = string(buf, flexible, "the protocol type")?;
    Ok(JoinGroupRequest::default()
        .with_group_id(GroupId(group_id))
        .with_session_timeout_ms(session_timeout_ms)
        .with_rebalance_timeout_ms(rebalance_timeout_ms)
        .with_member_id(member_id)
        .with_group_instance_id(group_instance_id)
        .with_protocol_type(protocol_type))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    /// A request of `count` protocols with every field `version` has.
    fn request(count: usize, version: i16) -> JoinGroupRequest {
        JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(if version >= 1 { 30_000 } else { -1 })
            .with_member_id(StrBytes::from_static_str("m"))
            .with_group_instance_id((version >= 5).then(|| StrBytes::from_static_str("i")))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(
                (0..count)
                    .map(|index| {
                        JoinGroupRequestProtocol::default()
                            .with_name(StrBytes::from_string(format!("p{}", index % 1_000)))
                            .with_metadata(Bytes::from(vec![index as u8; index % 3]))
                    })
                    .collect(),
            )
            .with_reason((version >= 8).then(|| StrBytes::from_static_str("because")))
    }

    fn body(request: &JoinGroupRequest, version: i16) -> Bytes {
        let mut body = BytesMut::new();
        request.encode(&mut body, version).unwrap();
        body.freeze()
    }

    #[test]
    fn many_protocols_are_read_from_the_frame_as_decoded() {
        for version in 0..=9 {
            let whole = request(1_500, version);
            let encoded = body(&whole, version);
            let decoded = JoinGroupRequest::decode(&mut encoded.clone(), version).unwrap();
            let framed = scan(&encoded, version).unwrap().unwrap();
            let mut shell = decoded.clone();
            shell.protocols.clear();
            assert_eq!(framed.request, shell, "v{version}");
            let expected = Protocols::from_pairs(
                decoded
                    .protocols
                    .iter()
                    .map(|p| (p.name.as_str(), &p.metadata[..])),
            );
            assert_eq!(framed.protocols, expected, "v{version}");
            assert!(scan(&body(&request(1_024, version), version), version).is_none());
        }
    }

    #[test]
    fn a_malformed_framed_request_is_refused_whole() {
        let encoded = body(&request(1_500, 9), 9);
        assert!(scan(&encoded.slice(..encoded.len() - 4), 9)
            .unwrap()
            .is_err());
    }

    #[test]
    fn a_protocol_name_that_is_not_utf8_is_read_as_kafka_reads_it() {
        let encoded = body(&request(1_500, 9), 9);
        let mut bad = BytesMut::from(&encoded[..]);
        let at = bad.windows(4).position(|w| w == b"p123").unwrap();
        bad[at] = 0xff;
        let framed = scan(&bad.freeze(), 9).unwrap().unwrap();
        assert!(framed.protocols.contains("\u{fffd}123"));
    }
}
