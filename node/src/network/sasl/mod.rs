//! SASL authentication of a connection on a SASL listener (KIP-43, KIP-152), as Kafka's
//! `SaslServerAuthenticator` runs it before any other request:
//!
//! 1. ApiVersions (any number of times) is served as usual; then SaslHandshake names the
//!    mechanism. Any other request closes the connection without a response (ILLEGAL_SASL_STATE).
//!    A mechanism not enabled gets UNSUPPORTED_SASL_MECHANISM with the enabled list, then close.
//! 2. After a v1 handshake every token travels in a SaslAuthenticate request (v0-2); after a v0
//!    handshake tokens are raw size-prefixed frames without a Kafka header. Anything else closes
//!    the connection.
//! 3. A failure is answered with SASL_AUTHENTICATION_FAILED and a message after
//!    `connection.failed.authentication.delay.ms`, then the connection closes. Success fixes the connection's
//!    principal (`User:<name>`) for its lifetime; later SaslHandshake / SaslAuthenticate requests
//!    reach the handlers, which answer ILLEGAL_SASL_STATE as Kafka's KafkaApis does.

mod plain;
mod scram;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use gregor_actors::context::Principal;
use gregor_publishers::scram::{ScramCredential, ScramMechanism};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseKind, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Message, StrBytes};

use crate::config_security::{SaslMechanism, SaslSettings};
use scram::{ScramServer, ScramStep};

/// Finds a user's SCRAM credential (from the metadata image).
pub(crate) type ScramLookup<'a> = &'a dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>;

/// Why authentication failed, as the client sees it.
#[derive(Debug)]
pub(crate) struct AuthError {
    /// What went wrong (logged).
    pub(crate) detail: String,
    /// Whether `detail` may be shown to the client; otherwise it gets Kafka's generic message,
    /// which does not tell an unknown user from a wrong password.
    client_visible: bool,
}

impl AuthError {
    fn client(detail: impl Into<String>) -> Self {
        AuthError {
            detail: detail.into(),
            client_visible: true,
        }
    }

    fn internal(detail: impl Into<String>) -> Self {
        AuthError {
            detail: detail.into(),
            client_visible: false,
        }
    }

    /// The message sent in the SaslAuthenticate response.
    fn client_message(&self, mechanism: &str) -> String {
        if self.client_visible {
            self.detail.clone()
        } else {
            format!(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
            )
        }
    }
}

/// Why a connection failed authentication: the `reason` label of the failure metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SaslFailure {
    /// Credentials were rejected (SASL_AUTHENTICATION_FAILED).
    InvalidCredentials,
    /// The handshake named a mechanism that is not enabled (UNSUPPORTED_SASL_MECHANISM).
    UnsupportedMechanism,
    /// A request that is not allowed at this point of the exchange (ILLEGAL_SASL_STATE).
    IllegalState,
    /// A SASL request that cannot be decoded or has an unsupported version.
    MalformedRequest,
}

impl SaslFailure {
    /// The metric label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SaslFailure::InvalidCredentials => "invalid_credentials",
            SaslFailure::UnsupportedMechanism => "unsupported_mechanism",
            SaslFailure::IllegalState => "illegal_sasl_state",
            SaslFailure::MalformedRequest => "malformed_request",
        }
    }
}

/// What the connection does with one frame of a connection that has not authenticated yet.
pub(crate) enum SaslStep {
    /// Serve it as a Kafka request (ApiVersions before the handshake).
    Serve,
    /// Write this and read the next frame.
    Reply(Bytes),
    /// Write this; from now on the connection is `principal`.
    Authenticated {
        reply: Bytes,
        principal: Principal,
        mechanism: &'static str,
    },
    /// Write the reply if any, wait the failure delay, close.
    Fail {
        reply: Option<Bytes>,
        reason: SaslFailure,
        mechanism: Option<&'static str>,
        detail: String,
    },
}

enum State {
    Handshake,
    Authenticate {
        mechanism: SaslMechanism,
        /// A v0 handshake: tokens are raw frames, not SaslAuthenticate requests.
        raw: bool,
        // Boxed: a SCRAM exchange in flight holds its keys and messages; most connections
        // spend their life in `Done`.
        scram: Box<ScramServer>,
    },
    Done,
}

/// What a connection authenticated as, and until when (KIP-368).
struct Established {
    mechanism: SaslMechanism,
    username: String,
    expires_at: Option<Instant>,
}

/// The SASL state of one connection.
pub(crate) struct SaslSession {
    settings: Arc<SaslSettings>,
    state: State,
    established: Option<Established>,
}

impl SaslSession {
    pub(crate) fn new(settings: Arc<SaslSettings>) -> Self {
        SaslSession {
            settings,
            state: State::Handshake,
            established: None,
        }
    }

    /// Whether the connection has authenticated (and is not re-authenticating).
    pub(crate) fn is_authenticated(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Whether the session of an authenticated connection has outlived
    /// `connections.max.reauth.ms` without re-authenticating (KIP-368).
    pub(crate) fn expired(&self, now: Instant) -> bool {
        self.expires_at().is_some_and(|at| now >= at)
    }

    /// When the session of an authenticated connection ends (`None`: never).
    pub(crate) fn expires_at(&self) -> Option<Instant> {
        self.established.as_ref().and_then(|e| e.expires_at)
    }

    /// Starts a re-authentication if `frame` is a SaslHandshake on an authenticated connection
    /// of a listener with `connections.max.reauth.ms` set; true if it did.
    pub(crate) fn begin_reauthentication(&mut self, frame: &Bytes) -> bool {
        let handshake = frame.len() >= 2
            && i16::from_be_bytes([frame[0], frame[1]]) == ApiKey::SaslHandshake as i16;
        if !handshake || self.settings.reauth_ms <= 0 || !self.is_authenticated() {
            return false;
        }
        self.state = State::Handshake;
        true
    }

    /// Records a successful (re-)authentication of `username` with `mechanism`; a
    /// re-authentication must keep the principal, as Kafka's `ReauthInfo` requires.
    fn establish(&mut self, mechanism: SaslMechanism, username: &str) -> Result<(), String> {
        if let Some(previous) = &self.established {
            if previous.username != username {
                return Err(format!(
                    "Cannot change principals during re-authentication from User.{}: User.{username}",
                    previous.username
                ));
            }
        }
        let now = Instant::now();
        self.established = Some(Established {
            mechanism,
            username: username.to_owned(),
            expires_at: u64::try_from(self.settings.reauth_ms)
                .ok()
                .filter(|ms| *ms > 0)
                .map(|ms| now + Duration::from_millis(ms)),
        });
        self.state = State::Done;
        Ok(())
    }

    /// `sasl.server.max.receive.size`, the frame limit until authentication.
    pub(crate) fn max_receive_size(&self) -> i32 {
        self.settings.max_receive_size
    }

    /// `connection.failed.authentication.delay.ms`.
    pub(crate) fn failure_delay_ms(&self) -> u64 {
        self.settings.failed_authentication_delay_ms
    }

    /// Handles one frame (without its size prefix) of an unauthenticated connection.
    pub(crate) fn on_frame(&mut self, frame: &Bytes, lookup: ScramLookup<'_>) -> SaslStep {
        match &mut self.state {
            State::Done => SaslStep::Serve,
            State::Handshake => self.handshake(frame),
            State::Authenticate {
                mechanism,
                raw: true,
                scram,
            } => {
                let mechanism = *mechanism;
                match evaluate(&self.settings, mechanism, scram, frame, lookup) {
                    Ok(Evaluated::Challenge(token)) => SaslStep::Reply(size_prefixed(&token)),
                    Ok(Evaluated::Done { username, token }) => {
                        if let Err(message) = self.establish(mechanism, &username) {
                            return SaslStep::Fail {
                                reply: None,
                                reason: SaslFailure::InvalidCredentials,
                                mechanism: Some(mechanism.name()),
                                detail: message,
                            };
                        }
                        SaslStep::Authenticated {
                            reply: size_prefixed(&token),
                            principal: user(username),
                            mechanism: mechanism.name(),
                        }
                    }
                    // Without a SaslAuthenticate header there is no way to carry an error.
                    Err(error) => SaslStep::Fail {
                        reply: None,
                        reason: SaslFailure::InvalidCredentials,
                        mechanism: Some(mechanism.name()),
                        detail: error.detail,
                    },
                }
            }
            State::Authenticate {
                mechanism, scram, ..
            } => {
                let mechanism = *mechanism;
                let request = match decode_request::<SaslAuthenticateRequest>(
                    frame,
                    ApiKey::SaslAuthenticate,
                ) {
                    Ok(request) => request,
                    Err(failure) => return failure.with_mechanism(mechanism.name()),
                };
                let (header, request) = request;
                let version = header.request_api_version;
                let response = SaslAuthenticateResponse::default();
                match evaluate(
                    &self.settings,
                    mechanism,
                    scram,
                    &request.auth_bytes,
                    lookup,
                ) {
                    Ok(Evaluated::Challenge(token)) => {
                        let body = response.with_auth_bytes(Bytes::from(token));
                        reply_or_fail(&header, ResponseKind::SaslAuthenticate(body), version)
                    }
                    Ok(Evaluated::Done { username, token }) => {
                        if let Err(message) = self.establish(mechanism, &username) {
                            let body = response
                                .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                                .with_error_message(Some(StrBytes::from_string(message.clone())));
                            return SaslStep::Fail {
                                reply: encode(
                                    &header,
                                    ResponseKind::SaslAuthenticate(body),
                                    version,
                                )
                                .ok(),
                                reason: SaslFailure::InvalidCredentials,
                                mechanism: Some(mechanism.name()),
                                detail: message,
                            };
                        }
                        let body = response
                            .with_auth_bytes(Bytes::from(token))
                            .with_session_lifetime_ms(self.settings.reauth_ms);
                        match encode(&header, ResponseKind::SaslAuthenticate(body), version) {
                            Ok(reply) => SaslStep::Authenticated {
                                reply,
                                principal: user(username),
                                mechanism: mechanism.name(),
                            },
                            Err(detail) => malformed(detail),
                        }
                    }
                    Err(error) => {
                        let body = response
                            .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                            .with_error_message(Some(StrBytes::from_string(
                                error.client_message(mechanism.name()),
                            )));
                        SaslStep::Fail {
                            reply: encode(&header, ResponseKind::SaslAuthenticate(body), version)
                                .ok(),
                            reason: SaslFailure::InvalidCredentials,
                            mechanism: Some(mechanism.name()),
                            detail: error.detail,
                        }
                    }
                }
            }
        }
    }

    fn handshake(&mut self, frame: &Bytes) -> SaslStep {
        if frame.len() >= 2
            && i16::from_be_bytes([frame[0], frame[1]]) == ApiKey::ApiVersions as i16
        {
            return SaslStep::Serve;
        }
        let (header, request) =
            match decode_request::<SaslHandshakeRequest>(frame, ApiKey::SaslHandshake) {
                Ok(decoded) => decoded,
                Err(failure) => return failure,
            };
        let version = header.request_api_version;
        let enabled: Vec<StrBytes> = self
            .settings
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect();
        let requested = request.mechanism.as_str();
        let mechanism =
            SaslMechanism::from_name(requested).filter(|m| self.settings.mechanisms.contains(m));
        if let Some(previous) = self
            .established
            .as_ref()
            .filter(|e| Some(e.mechanism) != mechanism)
        {
            return SaslStep::Fail {
                reply: encode(
                    &header,
                    ResponseKind::SaslHandshake(
                        SaslHandshakeResponse::default()
                            .with_error_code(ResponseError::UnsupportedSaslMechanism.code()),
                    ),
                    version,
                )
                .ok(),
                reason: SaslFailure::UnsupportedMechanism,
                mechanism: Some(previous.mechanism.name()),
                detail: format!(
                    "SASL mechanism '{requested}' requested by client is not supported for re-authentication of mechanism '{}'",
                    previous.mechanism.name()
                ),
            };
        }
        let response = SaslHandshakeResponse::default().with_mechanisms(enabled);
        match mechanism {
            Some(mechanism) => {
                self.state = State::Authenticate {
                    mechanism,
                    raw: version == 0,
                    scram: Box::new(ScramServer::Start),
                };
                reply_or_fail(&header, ResponseKind::SaslHandshake(response), version)
            }
            None => SaslStep::Fail {
                reply: encode(
                    &header,
                    ResponseKind::SaslHandshake(
                        response.with_error_code(ResponseError::UnsupportedSaslMechanism.code()),
                    ),
                    version,
                )
                .ok(),
                reason: SaslFailure::UnsupportedMechanism,
                mechanism: None,
                detail: format!("Unsupported SASL mechanism {requested}"),
            },
        }
    }
}

enum Evaluated {
    Challenge(Vec<u8>),
    Done { username: String, token: Vec<u8> },
}

fn evaluate(
    settings: &SaslSettings,
    mechanism: SaslMechanism,
    scram: &mut ScramServer,
    token: &[u8],
    lookup: ScramLookup<'_>,
) -> Result<Evaluated, AuthError> {
    match mechanism {
        SaslMechanism::Plain => {
            plain::authenticate(token, &settings.plain_users).map(|username| Evaluated::Done {
                username,
                token: Vec::new(),
            })
        }
        SaslMechanism::Scram(scram_mechanism) => {
            match scram.step(scram_mechanism, token, lookup)? {
                ScramStep::Challenge(token) => Ok(Evaluated::Challenge(token)),
                ScramStep::Done { username, reply } => Ok(Evaluated::Done {
                    username,
                    token: reply,
                }),
            }
        }
    }
}

fn user(name: String) -> Principal {
    Principal {
        principal_type: "User".to_owned(),
        name,
    }
}

impl SaslStep {
    fn with_mechanism(self, name: &'static str) -> Self {
        match self {
            SaslStep::Fail {
                reply,
                reason,
                detail,
                ..
            } => SaslStep::Fail {
                reply,
                reason,
                mechanism: Some(name),
                detail,
            },
            other => other,
        }
    }
}

fn malformed(detail: String) -> SaslStep {
    SaslStep::Fail {
        reply: None,
        reason: SaslFailure::MalformedRequest,
        mechanism: None,
        detail,
    }
}

/// Decodes a request of `expected` (header and body); anything else is a closing failure.
fn decode_request<T: Decodable + Message>(
    frame: &Bytes,
    expected: ApiKey,
) -> Result<(RequestHeader, T), SaslStep> {
    if frame.len() < 4 {
        return Err(malformed(format!(
            "a {}-byte frame has no request header",
            frame.len()
        )));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    if key != expected as i16 {
        let name =
            ApiKey::try_from(key).map_or_else(|_| format!("api key {key}"), |k| format!("{k:?}"));
        return Err(SaslStep::Fail {
            reply: None,
            reason: SaslFailure::IllegalState,
            mechanism: None,
            detail: format!(
                "Unexpected Kafka request of type {name} during SASL authentication (expected {expected:?})"
            ),
        });
    }
    if !(T::VERSIONS.min..=T::VERSIONS.max).contains(&version) {
        return Err(malformed(format!(
            "{expected:?} v{version} is not supported"
        )));
    }
    let mut body = frame.clone();
    let decoded = super::connection::decode_guarded(|| {
        let header = RequestHeader::decode(&mut body, expected.request_header_version(version))?;
        let request = T::decode(&mut body, version)?;
        Ok((header, request))
    });
    decoded.map_err(|e| malformed(format!("cannot decode {expected:?} v{version}: {e}")))
}

fn encode(header: &RequestHeader, body: ResponseKind, version: i16) -> Result<Bytes, String> {
    let key = ApiKey::try_from(header.request_api_key)
        .map_err(|_| format!("unknown api key {}", header.request_api_key))?;
    super::connection::encode_response(
        header.correlation_id,
        key.response_header_version(version),
        version,
        &body,
    )
}

fn reply_or_fail(header: &RequestHeader, body: ResponseKind, version: i16) -> SaslStep {
    match encode(header, body, version) {
        Ok(reply) => SaslStep::Reply(reply),
        Err(detail) => malformed(detail),
    }
}

fn size_prefixed(token: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + token.len());
    out.put_u32(token.len() as u32);
    out.put_slice(token);
    out.freeze()
}
