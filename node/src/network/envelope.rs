//! Kafka's Envelope (api key 58, KIP-590): how a broker hands a client's request to the active
//! controller together with who sent it. The broker wraps the client's request frame (header
//! included) with the client's principal, serialized as Kafka's `DefaultKafkaPrincipalBuilder`
//! does (a version-prefixed `DefaultPrincipalData`), and the client's IP address; the
//! controller handles the inner request as that client and answers inside an EnvelopeResponse.

use std::net::IpAddr;

use bytes::{BufMut, Bytes, BytesMut};
use gregor_actors::context::{Caller, Principal};
use kafka_protocol::messages::{
    ApiKey, DefaultPrincipalData, EnvelopeRequest, EnvelopeResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

/// The only Envelope version Kafka defines.
const ENVELOPE_VERSION: i16 = 0;
/// The only `DefaultPrincipalData` version Kafka defines.
const PRINCIPAL_DATA_VERSION: i16 = 0;
/// The client id of the envelope's own header (the inner request keeps the client's).
const ENVELOPE_CLIENT_ID: &str = "gregor-broker";

/// `principal` as Kafka's `DefaultKafkaPrincipalBuilder.serialize` writes it: the data
/// version, then `DefaultPrincipalData` (type, name, token_authenticated; Gregor has no
/// delegation tokens).
pub fn encode_principal(principal: &Principal) -> Result<Bytes, String> {
    let data = DefaultPrincipalData::default()
        .with_type(StrBytes::from_string(principal.principal_type.clone()))
        .with_name(StrBytes::from_string(principal.name.clone()))
        .with_token_authenticated(false);
    let mut out = BytesMut::new();
    out.put_i16(PRINCIPAL_DATA_VERSION);
    data.encode(&mut out, PRINCIPAL_DATA_VERSION)
        .map_err(|e| format!("cannot encode the principal {principal}: {e}"))?;
    Ok(out.freeze())
}

/// Reads a principal `encode_principal` (or Kafka's broker) wrote.
pub fn decode_principal(mut bytes: &[u8]) -> Result<Principal, String> {
    if bytes.len() < 2 {
        return Err(format!("a {}-byte principal", bytes.len()));
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    if version != PRINCIPAL_DATA_VERSION {
        return Err(format!("Invalid principal data version {version}"));
    }
    bytes = &bytes[2..];
    let mut buf = Bytes::copy_from_slice(bytes);
    let data = super::connection::decode_guarded(|| {
        DefaultPrincipalData::decode(&mut buf, PRINCIPAL_DATA_VERSION)
    })?;
    Ok(Principal {
        principal_type: data._type.to_string(),
        name: data.name.to_string(),
    })
}

/// The client's address as the envelope carries it: its 4 or 16 bytes. `host` is Kafka's form
/// (`/127.0.0.1`).
fn encode_address(host: &str) -> Result<Bytes, String> {
    let ip: IpAddr = host
        .strip_prefix('/')
        .unwrap_or(host)
        .parse()
        .map_err(|e| format!("the client address {host:?} is not an IP address: {e}"))?;
    Ok(match ip {
        IpAddr::V4(v4) => Bytes::copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => Bytes::copy_from_slice(&v6.octets()),
    })
}

/// The client's address in Kafka's form from the envelope's 4 or 16 bytes.
pub fn decode_address(bytes: &[u8]) -> Option<String> {
    let ip = match bytes.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?),
        16 => IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?),
        _ => return None,
    };
    Some(format!("/{ip}"))
}

/// The Envelope frame carrying `request`, a client's request frame (header and body, no size
/// prefix), for `caller`, as the two parts written around `request` itself, which is not
/// copied: the size prefix, header and the request's length; then the principal, the address
/// and the tagged fields. It reuses the inner correlation id.
pub(crate) fn wrap(request: &[u8], caller: &Caller) -> Result<(Bytes, Bytes), String> {
    let correlation_id = request
        .get(4..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, i32::from_be_bytes);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Envelope as i16)
        .with_request_api_version(ENVELOPE_VERSION)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(ENVELOPE_CLIENT_ID)));
    // The request data comes first in the body: encoded empty, its one-byte length (1) is
    // where the request's own length and bytes go.
    let body = EnvelopeRequest::default()
        .with_request_data(Bytes::new())
        .with_request_principal(Some(encode_principal(&caller.principal)?))
        .with_client_host_address(encode_address(&caller.client_host)?);
    let mut head = BytesMut::with_capacity(64);
    head.put_i32(0);
    header
        .encode(&mut head, EnvelopeRequest::header_version(ENVELOPE_VERSION))
        .map_err(|e| format!("cannot encode an envelope: {e}"))?;
    let mut tail = BytesMut::with_capacity(64);
    body.encode(&mut tail, ENVELOPE_VERSION)
        .map_err(|e| format!("cannot encode an envelope: {e}"))?;
    if tail.first() != Some(&1) {
        return Err("an envelope body of an unexpected shape".to_owned());
    }
    let tail = tail.split_off(1);
    // Compact bytes: the length plus one, as an array's length is written.
    super::repeated::put_array_length(&mut head, request.len(), true)
        .map_err(|_| "an envelope over 2 GiB".to_owned())?;
    let size = i32::try_from(head.len() - 4 + request.len() + tail.len())
        .map_err(|_| "an envelope over 2 GiB".to_owned())?;
    head[..4].copy_from_slice(&size.to_be_bytes());
    Ok((head.freeze(), tail.freeze()))
}

/// The inner response frame (header and body, no size prefix) of an EnvelopeResponse frame
/// body, or the envelope's error code.
pub(crate) fn unwrap(response: Bytes) -> Result<Bytes, EnvelopeFailure> {
    let mut buf = response;
    let decoded = super::connection::decode_guarded(|| {
        ResponseHeader::decode(&mut buf, EnvelopeResponse::header_version(ENVELOPE_VERSION))?;
        EnvelopeResponse::decode(&mut buf, ENVELOPE_VERSION)
    })
    .map_err(EnvelopeFailure::Malformed)?;
    match (decoded.error_code, decoded.response_data) {
        (0, Some(data)) => Ok(data),
        (0, None) => Err(EnvelopeFailure::Malformed(
            "an envelope response without an error or data".into(),
        )),
        (code, _) => Err(EnvelopeFailure::Refused(code)),
    }
}

/// Why an envelope brought no inner response back.
#[derive(Debug)]
pub(crate) enum EnvelopeFailure {
    /// The controller answered with this error code (CLUSTER_AUTHORIZATION_FAILED, ...).
    Refused(i16),
    /// The answer was not an EnvelopeResponse.
    Malformed(String),
}

impl std::fmt::Display for EnvelopeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnvelopeFailure::Refused(code) => write!(
                f,
                "the controller refused the envelope with {:?}",
                kafka_protocol::error::ResponseError::try_from_code(*code)
            ),
            EnvelopeFailure::Malformed(reason) => write!(f, "a bad envelope response: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_bytes_are_kafkas() -> Result<(), String> {
        let alice = Principal {
            principal_type: "User".into(),
            name: "alice".into(),
        };
        let bytes = encode_principal(&alice)?;
        // Version 0, then compact strings (length + 1), the boolean and no tagged fields, as
        // Kafka's DefaultPrincipalData (flexible from v0) is written.
        assert_eq!(&bytes[..], b"\x00\x00\x05User\x06alice\x00\x00");
        assert_eq!(decode_principal(&bytes)?, alice);
        assert!(decode_principal(b"\x00\x01\x05User\x06alice\x00\x00").is_err());
        assert!(decode_principal(b"\x00").is_err());
        assert!(decode_principal(b"\x00\x00\x7fUser").is_err());
        Ok(())
    }

    #[test]
    fn a_wrapped_request_decodes_as_kafkas_envelope() -> Result<(), String> {
        let caller = Caller {
            principal: Principal {
                principal_type: "User".into(),
                name: "alice".into(),
            },
            client_host: "/127.0.0.1".into(),
            client_id: "c".into(),
        };
        // Inner requests of 0, 127 and 128 bytes and one of 300: one- and two-byte lengths.
        for length in [8, 127, 128, 300] {
            let mut request = vec![7u8; length];
            request[4..8].copy_from_slice(&42i32.to_be_bytes());
            let (head, tail) = wrap(&request, &caller)?;
            let frame = [&head[..], &request, &tail].concat();
            let size = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
            assert_eq!(size as usize, frame.len() - 4);
            let mut body = Bytes::from(frame).slice(4..);
            let header = RequestHeader::decode(&mut body, 2).map_err(|e| e.to_string())?;
            assert_eq!(header.request_api_key, ApiKey::Envelope as i16);
            assert_eq!(header.correlation_id, 42);
            let envelope = EnvelopeRequest::decode(&mut body, 0).map_err(|e| e.to_string())?;
            assert_eq!(&envelope.request_data[..], &request[..]);
            assert_eq!(
                decode_principal(envelope.request_principal.as_deref().unwrap_or_default())?,
                caller.principal
            );
            assert_eq!(&envelope.client_host_address[..], &[127, 0, 0, 1]);
            assert!(body.is_empty());
        }
        Ok(())
    }

    #[test]
    fn addresses_are_4_or_16_bytes() -> Result<(), String> {
        let v4 = encode_address("/127.0.0.1")?;
        assert_eq!(&v4[..], &[127, 0, 0, 1]);
        assert_eq!(decode_address(&v4).as_deref(), Some("/127.0.0.1"));
        let v6 = encode_address("/::1")?;
        assert_eq!(v6.len(), 16);
        assert_eq!(decode_address(&v6).as_deref(), Some("/::1"));
        assert_eq!(decode_address(&[1, 2, 3]), None);
        assert!(encode_address("").is_err());
        Ok(())
    }
}
