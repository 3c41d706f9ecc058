//! One client connection: read a frame, decode it, run its handler, write the response, repeat.
//!
//! Requests on a connection are handled one at a time in arrival order, as Kafka's network
//! processor mutes a channel until its response is sent; clients may pipeline, the socket
//! buffers what follows, and responses leave in request order. One exception: consecutive
//! Produce requests (acks 1 or -1, no produce or request quota in force) are served up to
//! [`PRODUCES_IN_FLIGHT`] at a time, each started once the one before it has queued its
//! appends on the log shards, so appends keep request order and answers still leave in it.
//! A frame that cannot be served (unknown API, unsupported version, malformed header or body,
//! bad size) closes this connection only, with no response, and the reason is counted.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use gregor_actors::context::{Caller, HandlerContext, ListenerKind, Principal, RequestInfo};
use gregor_actors::handlers::throttle::raise_throttle_time;
use gregor_actors::handlers::{
    self, error_name, unsupported_version_response, ApiResponse, Delivery,
};
use gregor_actors::log_manager::ReadMemoryHold;
use gregor_actors::quota::sampler::request_time_percent;
use gregor_actors::quota::{QuotaManager, SensorCache, SharedSensorCache};
use gregor_metrics::{CloseReason, RequestTimings};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::AsyncWriteExt;

use super::busy_time::{timed, PollTimed};
use super::forwarded::Appended;
use super::forwarded::ForwardedAnswer;
use super::frame::FrameError;
use super::frame_source::FrameSource;
use super::idle::{unless_stalled, Activity, IdleTimeout, NotingWrites};
use super::memory_pool::Reservation;
use super::partition_list_chunks::{
    self, is_long, Chunked, DeleteRecordsList, DescribeProducersList, DescribeQuorumList,
    OffsetCommitList, OffsetDeleteList, OffsetForLeaderEpochList,
};
use super::repeated::{ListWriter, ResponseBytes};
use super::sasl::{SaslSession, SaslStep};
use super::tls::{Stream, StreamWriter};
use super::topic_list_chunks::{CreatePartitionsApi, CreateTopicsApi};
use crate::quorum::service::ForwardError;

/// Settings every connection of a listener shares.
#[derive(Clone)]
pub(crate) struct ConnectionSettings {
    /// Serves quorum RPCs and forwards mutations to the active controller.
    pub(crate) quorum: std::sync::Arc<crate::quorum::QuorumService>,
    /// True once the node is ready to serve Kafka requests.
    pub(crate) ready: tokio::sync::watch::Receiver<bool>,
    pub(crate) listener_name: std::sync::Arc<str>,
    pub(crate) listener_kind: ListenerKind,
    pub(crate) max_request_size: i32,
    pub(crate) idle_timeout: Duration,
    /// `queued.max.request.bytes`: each frame's bytes are reserved before its body is read.
    pub(crate) memory: std::sync::Arc<super::memory_pool::MemoryPool>,
    /// The listener's SASL settings, on SASL listeners (connections authenticate first).
    pub(crate) sasl: Option<std::sync::Arc<crate::config_security::SaslSettings>>,
    /// Whether the listener authenticates its clients (any protocol but PLAINTEXT): private
    /// quorum RPCs then need a principal allowed CLUSTER_ACTION.
    pub(crate) authenticated_listener: bool,
}

/// Why a request gets no answer and its connection closes.
struct Refusal {
    reason: CloseReason,
    detail: String,
}

fn refuse(reason: CloseReason, detail: impl Into<String>) -> Refusal {
    Refusal {
        reason,
        detail: detail.into(),
    }
}

/// Serves one connection until it closes; returns why it closed.
pub(crate) async fn serve(
    stream: Stream,
    principal: Principal,
    handlers: HandlerContext,
    settings: ConnectionSettings,
) -> CloseReason {
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "unknown".to_owned(), |a| a.to_string());
    // Kafka's form of the client address (DescribeGroups' client host).
    let client_host: std::sync::Arc<str> = stream
        .peer_addr()
        .map_or_else(|_| String::new(), |a| format!("/{}", a.ip()))
        .into();
    let mut principal = std::sync::Arc::new(principal);
    let mut sasl = settings.sasl.clone().map(SaslSession::new);
    let (reader, mut writer) = stream.split();
    let mut frames = FrameSource::new(reader);
    // What the peer proved for private RPCs (a broker's connection to the controller is one).
    let mut session = crate::quorum::service::PeerSession::default();
    // One per Produce that may be in flight at once (`ProduceSection`).
    let mut caches: [ConnectionCaches; PRODUCES_IN_FLIGHT] = Default::default();
    let mut request_metrics = gregor_metrics::RequestMetrics::default();
    loop {
        let (frame, reserved) = match frames
            .next(
                frame_limit(&settings, sasl.as_ref(), session.is_known_peer()),
                &settings.memory,
                settings.idle_timeout,
            )
            .await
        {
            Err(_) => {
                tracing::debug!(%peer, "closing idle connection");
                return CloseReason::Idle;
            }
            Ok(Err(FrameError::Closed)) => return CloseReason::ClientClosed,
            Ok(Err(error)) => {
                tracing::info!(%peer, listener = %settings.listener_name, %error, "closing connection");
                return error.close_reason();
            }
            Ok(Ok(frame)) => frame,
        };
        // Private quorum RPCs (api keys 32000+) skip the Kafka path and the ready gate, on a
        // controller listener only; elsewhere they are unknown api keys like any other.
        if settings.listener_kind == ListenerKind::Controller
            && frame.len() >= 2
            && crate::quorum::rpc::is_quorum_api_key(i16::from_be_bytes([frame[0], frame[1]]))
        {
            use crate::quorum::service::PrivateOutcome;
            if crate::quorum::transport::isolated_by_test_hook() {
                return CloseReason::IoError;
            }
            // KIP-368 holds for peers too: they renew their sessions before they end.
            if sasl
                .as_ref()
                .is_some_and(|s| s.is_authenticated() && s.expired(Instant::now()))
            {
                tracing::info!(%peer, listener = %settings.listener_name, "closing a quorum connection whose SASL session expired without re-authentication");
                return CloseReason::SessionExpired;
            }
            if let Err(detail) = may_send_private(
                &settings,
                sasl.as_ref(),
                &handlers,
                &principal,
                &client_host,
            ) {
                tracing::info!(%peer, listener = %settings.listener_name, %principal, %detail, "closing a quorum connection");
                return CloseReason::ClusterAuthorizationFailed;
            }
            match settings.quorum.serve_private(&mut session, &frame).await {
                PrivateOutcome::Reply(bytes) if writer.write_all(&bytes).await.is_ok() => continue,
                // The learner writes nothing past its hello unless asked, and the link ends on
                // anything it does write: bytes already read past the hello end it too.
                PrivateOutcome::RaftLink(..) if frames.has_buffered_bytes() => {
                    tracing::info!(%peer, listener = %settings.listener_name, "closing a raft link whose learner wrote past its hello");
                    return CloseReason::MalformedRequest;
                }
                PrivateOutcome::RaftLink(bytes, node_id)
                    if writer.write_all(&bytes).await.is_ok() =>
                {
                    let expires_at = sasl.as_ref().and_then(|s| s.expires_at());
                    let Some(stream) = frames.into_stream(writer) else {
                        return CloseReason::IoError;
                    };
                    return match settings
                        .quorum
                        .serve_raft_link(stream, node_id, expires_at)
                        .await
                    {
                        true => CloseReason::SessionExpired,
                        false => CloseReason::ClientClosed,
                    };
                }
                PrivateOutcome::Refuse(bytes) => {
                    let _ = writer.write_all(&bytes).await;
                    return CloseReason::MalformedRequest;
                }
                PrivateOutcome::Close(detail) => {
                    tracing::info!(%peer, listener = %settings.listener_name, %detail, "closing a quorum connection");
                    return CloseReason::MalformedRequest;
                }
                _ => return CloseReason::IoError,
            }
        }
        if let Some(session) = sasl.as_mut().filter(|s| s.is_authenticated()) {
            // KIP-368: a SaslHandshake starts a re-authentication; any other request after the
            // session's lifetime closes the connection.
            if !session.begin_reauthentication(&frame) && session.expired(Instant::now()) {
                tracing::info!(%peer, listener = %settings.listener_name, %principal, "closing a connection whose SASL session expired without re-authentication");
                return CloseReason::SessionExpired;
            }
        }
        if let Some(session) = sasl.as_mut().filter(|s| !s.is_authenticated()) {
            let image = handlers.image.load();
            let lookup = |user: &str, mechanism| image.scram.credential(user, mechanism).cloned();
            match session.on_frame(&frame, &lookup) {
                SaslStep::Serve => {}
                SaslStep::Reply(bytes) => {
                    if writer.write_all(&bytes).await.is_err() {
                        return CloseReason::IoError;
                    }
                    continue;
                }
                SaslStep::Authenticated {
                    reply,
                    principal: authenticated,
                    mechanism,
                } => {
                    tracing::debug!(%peer, listener = %settings.listener_name, %authenticated, mechanism, "authenticated");
                    gregor_metrics::authenticated(&settings.listener_name, mechanism);
                    principal = std::sync::Arc::new(authenticated);
                    if writer.write_all(&reply).await.is_err() {
                        return CloseReason::IoError;
                    }
                    continue;
                }
                SaslStep::Fail {
                    reply,
                    reason,
                    mechanism,
                    detail,
                } => {
                    tracing::info!(%peer, listener = %settings.listener_name, mechanism, reason = reason.as_str(), %detail, "failed authentication");
                    gregor_metrics::authentication_failed(
                        &settings.listener_name,
                        mechanism.unwrap_or(""),
                        reason.as_str(),
                    );
                    // Kafka holds the failure answer itself back (KIP-306), then closes: a
                    // client that drops the connection as soon as it reads the answer would
                    // otherwise try thousands of passwords a second.
                    tokio::time::sleep(Duration::from_millis(session.failure_delay_ms())).await;
                    if let Some(reply) = reply {
                        let _ = writer.write_all(&reply).await;
                    }
                    return CloseReason::AuthenticationFailed;
                }
            }
        }
        // The SASL exchange above runs before the node is ready: peers authenticate to a
        // controller listener while the quorum forms.
        if !*settings.ready.borrow() {
            let mut ready = settings.ready.clone();
            if ready.wait_for(|ready| *ready).await.is_err() {
                return CloseReason::IoError;
            }
        }
        let received = Instant::now();
        if serves_produces_together(&frame, &settings, &handlers, session.is_known_peer()) {
            let produces = ProduceSection {
                handlers: &handlers,
                settings: &settings,
                principal: &principal,
                client_host: &client_host,
                peer: &peer,
                frame_limit: frame_limit(&settings, sasl.as_ref(), session.is_known_peer()),
            };
            let served = produces
                .serve(
                    frame,
                    reserved,
                    received,
                    &mut frames,
                    &mut writer,
                    &mut caches,
                    &mut request_metrics,
                    sasl.as_ref(),
                )
                .await;
            match served {
                Ok(()) => continue,
                Err(reason) => return reason,
            }
        }
        let queued = request_metrics.queued();
        let request_bytes = frame.len();
        // An Envelope carries a client's request for that client's principal: only a node
        // this node knows, whose principal may send private RPCs, may send one.
        let envelopes = frame.get(..2) == Some(&(ApiKey::Envelope as i16).to_be_bytes()[..])
            && session.is_known_peer()
            && may_send_private(
                &settings,
                sasl.as_ref(),
                &handlers,
                &principal,
                &client_host,
            )
            .is_ok();
        let served = match process(
            frame,
            &handlers,
            &settings,
            Client {
                principal: &principal,
                host: &client_host,
                appends_queued: None,
            },
            envelopes,
            &mut caches[0],
        )
        .await
        {
            Ok(served) => served,
            Err(refusal) => return refused(&peer, &settings, refusal),
        };
        // Handled: its bytes go back to `queued.max.request.bytes` before the answer is
        // written, as Kafka's handler releases a request's buffer, so a client that does not
        // read its answers holds no pool memory other clients' requests wait for.
        drop(reserved);
        // A known node's connection carries many clients' requests (in envelopes) and its
        // own: the broker throttles its clients, so it is never muted.
        let muted = (!session.is_known_peer()).then_some(&*principal);
        if let Err(reason) = deliver(
            &mut writer,
            served,
            Arrival {
                received,
                request_bytes,
                queued,
            },
            &mut request_metrics,
            muted,
            &peer,
            settings.idle_timeout,
        )
        .await
        {
            return reason;
        }
    }
}

/// Logs why a connection closes without a response and returns the reason.
fn refused(peer: &str, settings: &ConnectionSettings, refusal: Refusal) -> CloseReason {
    tracing::info!(
        %peer,
        listener = %settings.listener_name,
        reason = refusal.reason.as_str(),
        detail = %refusal.detail,
        "closing connection without a response"
    );
    refusal.reason
}

/// When a request was read, its size and its place in the request queue gauge.
struct Arrival {
    received: Instant,
    request_bytes: usize,
    queued: gregor_metrics::QueuedRequest,
}

/// Writes a served request's answer (or nothing, or closes the connection after a failed
/// acks=0 Produce), records its metrics, and mutes the connection for its throttle (KIP-219)
/// unless `muted` is `None` (a known node's connection).
async fn deliver(
    writer: &mut StreamWriter,
    served: Served,
    arrival: Arrival,
    request_metrics: &mut gregor_metrics::RequestMetrics,
    muted: Option<&Principal>,
    peer: &str,
    idle_timeout: Duration,
) -> Result<(), CloseReason> {
    let Arrival {
        received,
        request_bytes,
        queued,
    } = arrival;
    let send_started = Instant::now();
    match served.delivery {
        Delivery::Send => {
            let activity = Activity::new();
            let mut noting = NotingWrites {
                inner: writer,
                activity: &activity,
            };
            match unless_stalled(served.bytes.write_to(&mut noting), &activity, idle_timeout).await
            {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "response write failed");
                    return Err(CloseReason::IoError);
                }
                Err(IdleTimeout) => {
                    tracing::debug!(%peer, "closing a connection that took no byte of its response for connections.max.idle.ms");
                    return Err(CloseReason::Idle);
                }
            }
        }
        Delivery::Silent => {}
        Delivery::Close => {
            record_metrics(
                request_metrics,
                &served,
                &RequestTimings {
                    queue: served.handler_started.duration_since(received),
                    local: served.handler_time.saturating_sub(served.remote_time),
                    remote: served.remote_time,
                    throttle: Duration::ZERO,
                    send: Duration::ZERO,
                    total: received.elapsed(),
                    request_bytes,
                },
            );
            tracing::debug!(%peer, "closing the connection after a failed acks=0 produce");
            return Err(CloseReason::ProduceFailedWithoutAcks);
        }
    }
    let done = Instant::now();
    let timings = RequestTimings {
        queue: served.handler_started.duration_since(received),
        local: served.handler_time.saturating_sub(served.remote_time),
        remote: served.remote_time,
        throttle: Duration::from_millis(served.throttle_time_ms.max(0) as u64),
        send: done.duration_since(send_started),
        total: done.duration_since(received),
        request_bytes,
    };
    record_metrics(request_metrics, &served, &timings);
    // Written: the answer's records give their read budget back.
    drop(served.read_memory);
    drop(queued);
    if let (Some(mute), Some(principal)) = (served.mute, muted) {
        // KIP-219: the response went out at once with its throttle time; now stop
        // reading this connection for that long. Requests the client sends meanwhile wait
        // in the socket buffers, so nothing is lost, and the idle timer does not run.
        let _muted = mute
            .manager
            .throttle(&principal.name, &mute.client_id, mute.throttle_ms);
        tokio::time::sleep(Duration::from_millis(mute.throttle_ms)).await;
    }
    Ok(())
}

/// How many Produce requests of one connection may be in flight at once.
const PRODUCES_IN_FLIGHT: usize = 2;

/// Whether `frame` starts a run of Produce requests served together. Only a client's
/// connection to a broker listener, and only while no produce or request quota (or quota
/// callback) could throttle it: a throttle must mute the connection before it reads the next
/// request, as Kafka's does.
fn serves_produces_together(
    frame: &Bytes,
    settings: &ConnectionSettings,
    handlers: &HandlerContext,
    known_peer: bool,
) -> bool {
    settings.listener_kind == ListenerKind::Broker
        && !known_peer
        && is_produce(frame)
        && !handlers.quotas.produce.shared.quotas_enabled()
        && !handlers.quotas.request.shared.quotas_enabled()
}

fn is_produce(frame: &Bytes) -> bool {
    frame.get(..2) == Some(&(ApiKey::Produce as i16).to_be_bytes()[..])
}

/// Serves a run of Produce requests, answering them in order, as the one-at-a-time loop would,
/// but not one at a time: once a Produce has queued its appends on the log shards
/// (`RequestInfo::appends_queued`), the next frame is read, and when it is another Produce it
/// is served beside it, its appends queued behind. A Produce with acks=0 never raises the
/// flag, so nothing is read past it before it is done (a failed one closes the connection).
/// Any other frame read ahead waits, with the rest of the connection, until the run is
/// answered.
struct ProduceSection<'a> {
    handlers: &'a HandlerContext,
    settings: &'a ConnectionSettings,
    principal: &'a std::sync::Arc<Principal>,
    client_host: &'a std::sync::Arc<str>,
    peer: &'a str,
    frame_limit: i32,
}

/// A Produce's answer, with the caches it was served with.
struct ProduceServed {
    served: Result<Served, Refusal>,
    caches: ConnectionCaches,
}

type ServingProduce<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Box<ProduceServed>> + Send + 'a>>;

/// Where a Produce of a run is.
enum Progress<'a> {
    Serving(ServingProduce<'a>),
    Served(Box<ProduceServed>),
}

/// A Produce of a run, with what its answer is recorded against.
struct InFlight<'a> {
    progress: Progress<'a>,
    appends_queued: std::sync::Arc<gregor_actors::context::AppendsQueued>,
    arrival: Arrival,
    /// The request's bytes in `queued.max.request.bytes`, until it is handled.
    reserved: Option<Reservation>,
}

/// What the section waited for.
enum Step {
    /// The Produce at this place in the run is served (not necessarily the oldest).
    Served(usize, Box<ProduceServed>),
    AppendsQueued,
    FrameRead,
}

impl<'a> ProduceSection<'a> {
    #[allow(clippy::too_many_arguments)]
    async fn serve(
        &self,
        first: Bytes,
        reserved: Reservation,
        received: Instant,
        frames: &mut FrameSource,
        writer: &mut StreamWriter,
        caches: &mut [ConnectionCaches; PRODUCES_IN_FLIGHT],
        request_metrics: &mut gregor_metrics::RequestMetrics,
        sasl: Option<&SaslSession>,
    ) -> Result<(), CloseReason> {
        let mut spare: Vec<ConnectionCaches> = caches.iter_mut().map(std::mem::take).collect();
        let mut in_flight = std::collections::VecDeque::with_capacity(PRODUCES_IN_FLIGHT);
        let first_caches = spare.remove(0);
        in_flight.push_back(self.start(first, received, reserved, first_caches, request_metrics));
        let outcome = self
            .run(
                &mut in_flight,
                &mut spare,
                frames,
                writer,
                request_metrics,
                sasl,
            )
            .await;
        drop(in_flight);
        for (slot, kept) in caches.iter_mut().zip(spare) {
            *slot = kept;
        }
        outcome
    }

    /// Until the run is answered: answers the oldest Produce once it is served, polls every
    /// one in flight, and reads the next frame once the newest has queued its appends.
    async fn run(
        &self,
        in_flight: &mut std::collections::VecDeque<InFlight<'a>>,
        spare: &mut Vec<ConnectionCaches>,
        frames: &mut FrameSource,
        writer: &mut StreamWriter,
        request_metrics: &mut gregor_metrics::RequestMetrics,
        sasl: Option<&SaslSession>,
    ) -> Result<(), CloseReason> {
        loop {
            while in_flight
                .front()
                .is_some_and(|p| matches!(p.progress, Progress::Served(_)))
            {
                let Some(InFlight {
                    progress: Progress::Served(finished),
                    arrival,
                    ..
                }) = in_flight.pop_front()
                else {
                    break;
                };
                let ProduceServed { served, caches } = *finished;
                spare.push(caches);
                let served =
                    served.map_err(|refusal| refused(self.peer, self.settings, refusal))?;
                deliver(
                    writer,
                    served,
                    arrival,
                    request_metrics,
                    Some(&**self.principal),
                    self.peer,
                    self.settings.idle_timeout,
                )
                .await?;
            }
            let Some(newest) = in_flight.back() else {
                return Ok(());
            };
            let queued_signal = std::sync::Arc::clone(&newest.appends_queued);
            let read_next = in_flight.len() < PRODUCES_IN_FLIGHT
                && queued_signal.is_raised()
                && !frames.has_read();
            if read_next {
                frames.start_ahead(
                    self.frame_limit,
                    std::sync::Arc::clone(&self.settings.memory),
                    self.settings.idle_timeout,
                );
            }
            let served = std::future::poll_fn(|cx| {
                for (index, produce) in in_flight.iter_mut().enumerate() {
                    if let Progress::Serving(work) = &mut produce.progress {
                        if let std::task::Poll::Ready(finished) = work.as_mut().poll(cx) {
                            return std::task::Poll::Ready((index, finished));
                        }
                    }
                }
                std::task::Poll::Pending
            });
            let step = tokio::select! {
                biased;
                (index, finished) = served => Step::Served(index, finished),
                () = queued_signal.raised(), if !queued_signal.is_raised() => Step::AppendsQueued,
                () = frames.ahead(), if read_next => Step::FrameRead,
            };
            match step {
                Step::Served(index, finished) => {
                    if let Some(produce) = in_flight.get_mut(index) {
                        produce.progress = Progress::Served(finished);
                        // Handled: its bytes go back to the pool before its answer is written.
                        produce.reserved = None;
                    }
                }
                // The loop looks at the flag again.
                Step::AppendsQueued => {}
                Step::FrameRead => {
                    // Only a Produce joins the run, and only on a connection whose SASL session
                    // (if any) is current; anything else waits for `FrameSource::next`.
                    let current =
                        sasl.is_none_or(|s| s.is_authenticated() && !s.expired(Instant::now()));
                    if let Some((frame, reservation)) =
                        frames.take_if(|frame| current && is_produce(frame))
                    {
                        let caches = spare.pop().unwrap_or_default();
                        in_flight.push_back(self.start(
                            frame,
                            Instant::now(),
                            reservation,
                            caches,
                            request_metrics,
                        ));
                    }
                }
            }
        }
    }

    fn start(
        &self,
        frame: Bytes,
        received: Instant,
        reserved: Reservation,
        caches: ConnectionCaches,
        request_metrics: &mut gregor_metrics::RequestMetrics,
    ) -> InFlight<'a> {
        let appends_queued = std::sync::Arc::new(gregor_actors::context::AppendsQueued::default());
        let raised = std::sync::Arc::clone(&appends_queued);
        let arrival = Arrival {
            received,
            request_bytes: frame.len(),
            queued: request_metrics.queued(),
        };
        let (handlers, settings, principal, host) = (
            self.handlers,
            self.settings,
            self.principal,
            self.client_host,
        );
        let work = Box::pin(async move {
            let mut caches = caches;
            let client = Client {
                principal,
                host,
                appends_queued: Some(&raised),
            };
            let served = process(frame, handlers, settings, client, false, &mut caches).await;
            Box::new(ProduceServed { served, caches })
        });
        InFlight {
            progress: Progress::Serving(work),
            appends_queued,
            arrival,
            reserved: Some(reserved),
        }
    }
}

/// Whether this connection may send private quorum RPCs. On an authenticated controller
/// listener (SSL, SASL_PLAINTEXT, SASL_SSL) only a controller or broker principal may, as Kafka
/// serves its controller and broker RPCs only to a principal allowed CLUSTER_ACTION on the
/// cluster: a SASL connection must have authenticated, and with an authorizer its principal
/// must be a super user or hold that ACL. On a PLAINTEXT controller listener every peer is
/// `User:ANONYMOUS`, and the quorum's hello checks alone decide.
fn may_send_private(
    settings: &ConnectionSettings,
    sasl: Option<&SaslSession>,
    handlers: &HandlerContext,
    principal: &Principal,
    client_host: &str,
) -> Result<(), String> {
    if !settings.authenticated_listener {
        return Ok(());
    }
    if sasl.is_some_and(|session| !session.is_authenticated()) {
        return Err("a private quorum RPC before SASL authentication".to_owned());
    }
    let Some(authorizer) = handlers.authorizer.as_deref() else {
        return Ok(());
    };
    let host = client_host.strip_prefix('/').unwrap_or(client_host);
    if authorizer.authorize(
        &principal.to_string(),
        host,
        gregor_publishers::acl::AclOperation::ClusterAction,
        gregor_publishers::acl::ResourceType::Cluster,
        gregor_publishers::acl::CLUSTER_NAME,
    ) {
        Ok(())
    } else {
        Err(
            "a private quorum RPC from a principal without CLUSTER_ACTION on the cluster"
                .to_owned(),
        )
    }
}

/// The largest frame accepted next: `sasl.server.max.receive.size` until a SASL connection has
/// authenticated, `socket.request.max.bytes` after.
fn frame_limit(settings: &ConnectionSettings, sasl: Option<&SaslSession>, known_peer: bool) -> i32 {
    match sasl.filter(|s| !s.is_authenticated()) {
        Some(session) => session.max_receive_size().min(settings.max_request_size),
        // A broker wraps a client's request of up to its own `socket.request.max.bytes` in an
        // Envelope: the controller takes that request with its envelope.
        None if known_peer && settings.listener_kind == ListenerKind::Controller => settings
            .max_request_size
            .saturating_add(ENVELOPE_ALLOWANCE_BYTES),
        None => settings.max_request_size,
    }
}

/// What an Envelope adds to the client's request it carries: its header, the client's
/// principal and address.
const ENVELOPE_ALLOWANCE_BYTES: i32 = 64 * 1024;

/// A response ready to write, and what the metrics need to know about it.
struct Served {
    bytes: ResponseBytes,
    delivery: Delivery,
    api_name: &'static str,
    api_version: i16,
    errors: handlers::ErrorCounts,
    throttle_time_ms: i32,
    /// Who mutes the connection after the response, and for how long (KIP-219).
    mute: Option<Mute>,
    handler_started: Instant,
    handler_time: Duration,
    /// The read budget a Fetch answer's records hold until they are written.
    read_memory: ReadMemoryHold,
    /// A second request-metric name (see [`handlers::ApiResponse::metric_alias`]).
    metric_alias: Option<&'static str>,
    /// Of `handler_time`, what the handler waited for others (Kafka's remote time).
    remote_time: Duration,
}

/// What this connection's requests resolved to: the sensors per quota type (a connection's
/// principal and client id rarely change, so the steady state skips the shared map; the
/// controller-mutation quota is charged by the controller, which has no connection), and the
/// client id its requests last named, shared by their [`RequestInfo`]s.
#[derive(Debug, Default)]
struct ConnectionCaches {
    request: SensorCache,
    produce: SensorCache,
    fetch: SharedSensorCache,
    client_id: Option<std::sync::Arc<str>>,
}

impl ConnectionCaches {
    /// The header's client id ("" when null), the cached one when it is the same.
    fn client_id(&mut self, named: Option<&str>) -> std::sync::Arc<str> {
        let named = named.unwrap_or_default();
        match &self.client_id {
            Some(cached) if **cached == *named => cached.clone(),
            _ => self.client_id.insert(std::sync::Arc::from(named)).clone(),
        }
    }
}

/// A throttled connection: the manager whose quota asked for the longest throttle.
struct Mute {
    manager: std::sync::Arc<QuotaManager>,
    client_id: String,
    throttle_ms: u64,
}

/// Records a request's errors before the request itself, so that a scrape counting the request
/// also counts its errors.
fn record_metrics(
    metrics: &mut gregor_metrics::RequestMetrics,
    served: &Served,
    timings: &RequestTimings,
) {
    for (code, count) in served.errors.iter() {
        metrics.record_errors(served.api_name, error_name(code), count);
    }
    metrics.record_request(served.api_name, served.api_version, timings);
    // KIP-1142: ListConfigResources v0 also counts as ListClientMetricsResources; a Fetch as
    // FetchConsumer or FetchFollower (errors count under the API's name only).
    if let Some(extra) =
        handlers::also_counted_as(served.api_name, served.api_version).or(served.metric_alias)
    {
        metrics.record_request(extra, served.api_version, timings);
    }
}

/// Who sent a request: the connection's principal and address (Kafka's form, `/127.0.0.1`),
/// or the client an Envelope speaks for.
#[derive(Clone, Copy)]
struct Client<'a> {
    principal: &'a std::sync::Arc<Principal>,
    host: &'a std::sync::Arc<str>,
    /// Raised by a Produce once its appends are queued (a run of Produces served together).
    appends_queued: Option<&'a std::sync::Arc<gregor_actors::context::AppendsQueued>>,
}

/// Serves one request frame; a request repeating list elements is served reduced and its
/// answer expanded (`repeated.rs`).
async fn process(
    frame: Bytes,
    handlers: &HandlerContext,
    settings: &ConnectionSettings,
    client: Client<'_>,
    envelopes: bool,
    quotas: &mut ConnectionCaches,
) -> Result<Served, Refusal> {
    let Some((api_key, api_version)) = frame
        .get(..4)
        .and_then(|h| {
            Some((
                ApiKey::try_from(i16::from_be_bytes([h[0], h[1]])).ok()?,
                i16::from_be_bytes([h[2], h[3]]),
            ))
        })
        .filter(|(key, version)| {
            handlers::lookup(*key, settings.listener_kind)
                .is_some_and(|spec| (spec.versions.min..=spec.versions.max).contains(version))
        })
    else {
        let wire_size = frame.len();
        return process_frame(
            frame, wire_size, handlers, settings, client, envelopes, quotas,
        )
        .await;
    };
    let wire_size = frame.len();
    let cannot_decode = |e| {
        refuse(
            CloseReason::MalformedRequest,
            format!("cannot decode {api_key:?} v{api_version}: {e}"),
        )
    };
    // Many elements whose answers are each their own: a chunk at a time (`list_chunks.rs`).
    if let Some(list) =
        decode_guarded(|| super::list_chunks::scan(&frame, api_key, api_version).transpose())
            .map_err(cannot_decode)?
    {
        return Box::pin(process_listed(
            list, handlers, settings, client, envelopes, quotas,
        ))
        .await;
    }
    // A ListOffsets naming many partitions answers its repeats itself (`list_offsets_chunks`).
    let chunked_later = match api_key {
        ApiKey::ListOffsets => super::list_offsets_chunks::is_long(&frame, api_version),
        ApiKey::OffsetForLeaderEpoch => is_long::<OffsetForLeaderEpochList>(&frame, api_version),
        ApiKey::DescribeProducers => is_long::<DescribeProducersList>(&frame, api_version),
        ApiKey::DeleteRecords => is_long::<DeleteRecordsList>(&frame, api_version),
        ApiKey::OffsetCommit => is_long::<OffsetCommitList>(&frame, api_version),
        ApiKey::OffsetDelete => is_long::<OffsetDeleteList>(&frame, api_version),
        ApiKey::ElectLeaders => super::topic_partitions::is_long(
            &frame,
            api_key,
            api_version,
            super::election_chunks::scan,
        ),
        ApiKey::AlterPartitionReassignments => super::topic_partitions::is_long(
            &frame,
            api_key,
            api_version,
            super::reassignment_chunks::scan,
        ),
        ApiKey::DeleteTopics => super::delete_topics_chunks::is_long(&frame, api_version),
        ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs => {
            super::config_chunks::is_long(&frame, api_key, api_version)
        }
        _ => false,
    };
    let reduced = decode_guarded(|| {
        if chunked_later {
            return Ok(None);
        }
        super::repeated::reduce(api_key, api_version, &frame).transpose()
    })
    .map_err(cannot_decode)?;
    let (frame, plan) = match reduced {
        Some(reduced) => {
            drop(frame);
            (reduced.frame, reduced.plan)
        }
        None => (frame, None),
    };
    let frame =
        decode_guarded(|| super::collapse::rewrite(api_key, api_version, &frame, &handlers.image))
            .map_err(cannot_decode)?
            .unwrap_or(frame);
    let mut served = process_frame(
        frame, wire_size, handlers, settings, client, envelopes, quotas,
    )
    .await?;
    // The plan expands the answer to the reduced request; a forwarded one over the streaming
    // limit is still on the controller's connection, so it is read whole first.
    if plan.is_some() && matches!(served.bytes, ResponseBytes::Forwarded(_)) {
        served.bytes =
            match std::mem::replace(&mut served.bytes, ResponseBytes::Whole(Bytes::new())) {
                ResponseBytes::Forwarded(answer) => ResponseBytes::Whole(
                    answer
                        .into_bytes(crate::quorum::transport::MAX_RESPONSE_BYTES)
                        .await
                        .map_err(|e| {
                            refuse(CloseReason::IoError, format!("a forwarded answer: {e}"))
                        })?,
                ),
                other => other,
            };
    }
    if let (Some(plan), ResponseBytes::Whole(bytes)) = (plan, &served.bytes) {
        served.bytes = plan
            .expand(
                bytes.clone(),
                api_key.response_header_version(api_version),
                api_version,
            )
            .map_err(|e| {
                tracing::error!(?api_key, api_version, error = %e, "cannot expand a response");
                refuse(CloseReason::MalformedRequest, e.to_string())
            })?;
    }
    Ok(served)
}

/// Serves a request listing many elements as requests of [`list_chunks::CHUNK`] elements
/// each, one after the other, and answers them as one.
async fn process_listed(
    list: super::list_chunks::ChunkedList,
    handlers: &HandlerContext,
    settings: &ConnectionSettings,
    client: Client<'_>,
    envelopes: bool,
    quotas: &mut ConnectionCaches,
) -> Result<Served, Refusal> {
    let handler_started = Instant::now();
    let failed = |e: anyhow::Error| refuse(CloseReason::MalformedRequest, e.to_string());
    let mut list = list;
    let mut answer = list.answer().map_err(|e| failed(e.into()))?;
    let mut errors = handlers::ErrorCounts::default();
    let (mut throttle_time_ms, mut mute, mut handler_time, mut api) =
        (0, None, Duration::ZERO, None);
    let (mut metric_alias, mut remote_time) = (None, Duration::ZERO);
    let mut requests = list.requests();
    while let Some(request) = requests.next() {
        let (frame, listed) = request.map_err(failed)?;
        let served = Box::pin(process(
            frame, handlers, settings, client, envelopes, quotas,
        ))
        .await?;
        let mut sink = answer.chunk(listed);
        served
            .bytes
            .write_to(&mut sink)
            .await
            .map_err(|e| failed(e.into()))?;
        sink.finish().map_err(failed)?;
        // A refusal answers every element as listed: served again without the reduction.
        if list.sends_distinct_keys() && answer.refused() {
            drop(requests);
            list = list.without_distinct_keys();
            return Box::pin(process_listed(
                list, handlers, settings, client, envelopes, quotas,
            ))
            .await;
        }
        for (code, times) in served.errors.iter() {
            errors.add_times(code, times);
        }
        handler_time += served.handler_time;
        remote_time += served.remote_time;
        metric_alias = metric_alias.or(served.metric_alias);
        if served.throttle_time_ms > throttle_time_ms {
            throttle_time_ms = served.throttle_time_ms;
            mute = served.mute;
        }
        api = Some((served.api_name, served.api_version));
    }
    let (api_name, api_version) =
        api.ok_or_else(|| failed(anyhow::anyhow!("no elements listed")))?;
    Ok(Served {
        bytes: ResponseBytes::Listed(Box::new(answer.finish(throttle_time_ms).map_err(failed)?)),
        delivery: Delivery::Send,
        api_name,
        api_version,
        errors,
        throttle_time_ms,
        mute,
        handler_started,
        handler_time,
        read_memory: ReadMemoryHold::default(),
        metric_alias,
        remote_time,
    })
}

/// A request decided a chunk at a time, its list left in the frame.
enum ChunkedRequest {
    Metadata(super::metadata_chunks::ChunkedMetadata),
    Produce(super::produce_chunks::ChunkedProduce),
    Fetch(super::fetch_chunks::ChunkedFetch),
    CreateTopics(super::topic_list_chunks::ChunkedCreateTopics),
    CreatePartitions(super::topic_list_chunks::ChunkedCreatePartitions),
    ListOffsets(super::list_offsets_chunks::ChunkedListOffsets),
    OffsetForLeaderEpoch(Chunked<OffsetForLeaderEpochList>),
    DescribeProducers(Chunked<DescribeProducersList>),
    DeleteRecords(Chunked<DeleteRecordsList>),
    OffsetCommit(Chunked<OffsetCommitList>),
    OffsetDelete(Chunked<OffsetDeleteList>),
    DescribeQuorum(Chunked<DescribeQuorumList>),
    DeleteTopics(super::delete_topics_chunks::ChunkedDeleteTopics),
    AlterScram(super::scram_chunks::ChunkedScramAlteration),
    AlterClientQuotas(super::quota_chunks::ChunkedQuotaAlteration),
    AlterConfigs(super::config_chunks::ChunkedConfigs),
    IncrementalAlterConfigs(super::config_chunks::ChunkedConfigs),
    ElectLeaders(super::election_chunks::ChunkedElections),
    AlterReassignments(super::reassignment_chunks::ChunkedReassignments),
    CreateAcls(super::acl_chunks::ChunkedAclCreations),
    DeleteAcls(super::acl_chunks::ChunkedAclFilters),
    AddRaftVoter(super::raft_voter_versions::FramedAddVoter),
    JoinGroup(super::join_group_frame::FramedJoin),
    ConsumerGroupHeartbeat(super::consumer_heartbeat_frame::FramedHeartbeat),
}

impl ChunkedRequest {
    /// The request as what looks at it before the handler sees it, without its list.
    fn shell(&self) -> RequestKind {
        match self {
            ChunkedRequest::Metadata(chunked) => chunked.shell(),
            ChunkedRequest::Produce(chunked) => chunked.shell(),
            ChunkedRequest::Fetch(chunked) => chunked.shell(),
            ChunkedRequest::CreateTopics(_) => RequestKind::CreateTopics(Default::default()),
            ChunkedRequest::CreatePartitions(_) => {
                RequestKind::CreatePartitions(Default::default())
            }
            ChunkedRequest::ListOffsets(chunked) => chunked.shell(),
            ChunkedRequest::OffsetForLeaderEpoch(chunked) => chunked.shell(),
            ChunkedRequest::DescribeProducers(chunked) => chunked.shell(),
            ChunkedRequest::DeleteRecords(chunked) => chunked.shell(),
            ChunkedRequest::OffsetCommit(chunked) => chunked.shell(),
            ChunkedRequest::OffsetDelete(chunked) => chunked.shell(),
            ChunkedRequest::DescribeQuorum(chunked) => chunked.shell(),
            ChunkedRequest::DeleteTopics(chunked) => chunked.shell(),
            ChunkedRequest::AlterScram(_) => {
                RequestKind::AlterUserScramCredentials(Default::default())
            }
            ChunkedRequest::AlterClientQuotas(_) => {
                RequestKind::AlterClientQuotas(Default::default())
            }
            ChunkedRequest::AlterConfigs(_) => RequestKind::AlterConfigs(Default::default()),
            ChunkedRequest::IncrementalAlterConfigs(_) => {
                RequestKind::IncrementalAlterConfigs(Default::default())
            }
            ChunkedRequest::ElectLeaders(_) => RequestKind::ElectLeaders(Default::default()),
            ChunkedRequest::AlterReassignments(_) => {
                RequestKind::AlterPartitionReassignments(Default::default())
            }
            ChunkedRequest::CreateAcls(_) => RequestKind::CreateAcls(Default::default()),
            ChunkedRequest::DeleteAcls(_) => RequestKind::DeleteAcls(Default::default()),
            ChunkedRequest::AddRaftVoter(framed) => {
                RequestKind::AddRaftVoter(framed.request.clone())
            }
            ChunkedRequest::JoinGroup(framed) => RequestKind::JoinGroup(framed.request.clone()),
            ChunkedRequest::ConsumerGroupHeartbeat(framed) => {
                RequestKind::ConsumerGroupHeartbeat(framed.request.clone())
            }
        }
    }

    /// Decides the request: the answer (`None` when no handler answers) with an empty list,
    /// and what writes the list (`None` when nothing is sent).
    async fn handle(
        self,
        handlers: &HandlerContext,
        info: &RequestInfo,
    ) -> anyhow::Result<(Option<handlers::ApiResponse>, Option<ListWriter>)> {
        Ok(match self {
            ChunkedRequest::Metadata(chunked) => {
                super::metadata_chunks::handle(handlers, info, chunked)
                    .await?
                    .map_or((None, None), |(answer, topics)| {
                        (Some(answer), Some(ListWriter::Metadata(Box::new(topics))))
                    })
            }
            ChunkedRequest::Produce(chunked) => {
                super::produce_chunks::handle(handlers, info, chunked)
                    .await?
                    .map_or((None, None), |(answer, partitions)| {
                        (Some(answer), partitions.map(ListWriter::Produce))
                    })
            }
            ChunkedRequest::Fetch(chunked) => {
                let (answer, partitions) =
                    super::fetch_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), partitions.map(ListWriter::Fetch))
            }
            ChunkedRequest::CreateTopics(chunked) => {
                let (answer, topics) =
                    super::topic_list_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), Some(ListWriter::CreateTopics(topics)))
            }
            ChunkedRequest::CreatePartitions(chunked) => {
                let (answer, topics) =
                    super::topic_list_chunks::handle_create_partitions(handlers, info, chunked)
                        .await?;
                (Some(answer), Some(ListWriter::CreatePartitions(topics)))
            }
            ChunkedRequest::ListOffsets(chunked) => {
                let (answer, partitions) =
                    super::list_offsets_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), Some(ListWriter::ListOffsets(partitions)))
            }
            ChunkedRequest::OffsetForLeaderEpoch(chunked) => {
                let (answer, partitions) =
                    partition_list_chunks::handle(handlers, info, chunked).await?;
                (
                    Some(answer),
                    partitions.map(ListWriter::OffsetForLeaderEpoch),
                )
            }
            ChunkedRequest::DescribeProducers(chunked) => {
                let (answer, partitions) =
                    partition_list_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), partitions.map(ListWriter::DescribeProducers))
            }
            ChunkedRequest::DeleteRecords(chunked) => {
                let (answer, partitions) =
                    partition_list_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), partitions.map(ListWriter::DeleteRecords))
            }
            ChunkedRequest::OffsetCommit(chunked) => {
                let (answer, partitions) =
                    partition_list_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), partitions.map(ListWriter::OffsetCommit))
            }
            ChunkedRequest::OffsetDelete(chunked) => {
                let (answer, partitions) =
                    partition_list_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), partitions.map(ListWriter::OffsetDelete))
            }
            ChunkedRequest::DescribeQuorum(chunked) => {
                let (answer, partitions) =
                    partition_list_chunks::handle_describe_quorum(handlers, info, chunked).await?;
                (Some(answer), partitions.map(ListWriter::DescribeQuorum))
            }
            ChunkedRequest::DeleteTopics(chunked) => {
                let (answer, topics) =
                    super::delete_topics_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), Some(ListWriter::DeleteTopics(topics)))
            }
            ChunkedRequest::AlterScram(chunked) => {
                let (answer, users) = super::scram_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), Some(ListWriter::AlterScram(users)))
            }
            ChunkedRequest::AlterClientQuotas(chunked) => {
                let (answer, entries) =
                    super::quota_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), Some(ListWriter::AlterClientQuotas(entries)))
            }
            ChunkedRequest::AlterConfigs(chunked) => {
                let (answer, resources) =
                    super::config_chunks::handle(handlers, info, chunked).await?;
                (
                    Some(answer),
                    Some(ListWriter::AlterConfigs(Box::new(resources))),
                )
            }
            ChunkedRequest::IncrementalAlterConfigs(chunked) => {
                let (answer, resources) =
                    super::config_chunks::handle(handlers, info, chunked).await?;
                (
                    Some(answer),
                    Some(ListWriter::IncrementalAlterConfigs(Box::new(resources))),
                )
            }
            ChunkedRequest::ElectLeaders(chunked) => {
                let (answer, topics) =
                    super::election_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), Some(ListWriter::ElectLeaders(topics)))
            }
            ChunkedRequest::AlterReassignments(chunked) => {
                let (answer, topics) =
                    super::reassignment_chunks::handle(handlers, info, chunked).await?;
                (Some(answer), Some(ListWriter::AlterReassignments(topics)))
            }
            ChunkedRequest::CreateAcls(chunked) => {
                let (answer, results) =
                    super::acl_chunks::handle_creations(handlers, info, chunked).await?;
                (Some(answer), Some(ListWriter::CreateAcls(results)))
            }
            ChunkedRequest::DeleteAcls(chunked) => {
                let (answer, results) =
                    super::acl_chunks::handle_filters(handlers, info, chunked).await?;
                (Some(answer), Some(ListWriter::DeleteAcls(results)))
            }
            ChunkedRequest::AddRaftVoter(framed) => {
                let request = framed.request.clone();
                let answer =
                    handlers::raft_voters::add_listed(handlers, info, request, &framed).await;
                (Some(answer), None)
            }
            ChunkedRequest::ConsumerGroupHeartbeat(framed) => {
                let answer = handlers::consumer_group_heartbeat_listed(
                    handlers,
                    info,
                    framed.request,
                    Some(framed.names),
                )
                .await;
                (Some(answer), None)
            }
            ChunkedRequest::JoinGroup(framed) => {
                let answer =
                    handlers::join_group_listed(handlers, info, framed.request, framed.protocols)
                        .await;
                (Some(answer), None)
            }
        })
    }
}

/// Serves one frame; `wire_size` is the size it came with (the produce quota counts it,
/// whatever was dropped from the frame before).
async fn process_frame(
    mut frame: Bytes,
    wire_size: usize,
    handlers: &HandlerContext,
    settings: &ConnectionSettings,
    client: Client<'_>,
    envelopes: bool,
    quotas: &mut ConnectionCaches,
) -> Result<Served, Refusal> {
    let Client {
        principal,
        host: client_host,
        appends_queued,
    } = client;
    if frame.len() < 4 {
        return Err(refuse(
            CloseReason::MalformedRequest,
            format!("a {}-byte frame has no request header", frame.len()),
        ));
    }
    let api_key_code = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(api_key_code).map_err(|_| {
        refuse(
            CloseReason::UnknownApiKey,
            format!("Unknown API key {api_key_code}"),
        )
    })?;
    let spec = handlers::lookup(api_key, settings.listener_kind).ok_or_else(|| {
        refuse(
            CloseReason::UnknownApiKey,
            format!(
                "Received request api key {api_key_code} with version {api_version} which is not enabled"
            ),
        )
    })?;
    let in_range = (spec.versions.min..=spec.versions.max).contains(&api_version);
    if !in_range && api_key != ApiKey::ApiVersions {
        return Err(refuse(
            CloseReason::UnsupportedVersion,
            format!(
                "Received request api key {api_key_code} with version {api_version} which is not enabled"
            ),
        ));
    }
    if api_key == ApiKey::Envelope {
        return Box::pin(serve_envelope(frame, handlers, settings, envelopes)).await;
    }
    let mut forward =
        settings.listener_kind == ListenerKind::Broker && settings.quorum.should_forward(api_key);
    // With an authorizer the broker decodes and authorizes first, so a refused part never
    // reaches the controller; without one it forwards the bytes as they came.
    let mut controller_failure = None;
    if forward && handlers.authorizer.is_none() {
        let forwarded = forward_raw(
            &frame,
            spec,
            api_version,
            handlers,
            settings,
            client,
            quotas,
        )
        .await;
        // Without an answer the request is answered here, one naming many topics from its
        // frame like any other: NOT_CONTROLLER (the client retries) or the controller's failure.
        match forwarded {
            Ok(served) => return Ok(served),
            Err(error) => controller_failure = answered_here(error)?,
        }
        forward = false;
    }
    let raw_frame = frame.clone();
    let decode_started = Instant::now();
    let header_version = api_key.request_header_version(api_version);
    let header =
        decode_guarded(|| RequestHeader::decode(&mut frame, header_version)).map_err(|e| {
            refuse(
                CloseReason::MalformedRequest,
                format!("bad request header: {e}"),
            )
        })?;
    let correlation_id = header.correlation_id;
    let handler_started = Instant::now();

    if !in_range {
        // KIP-511: an ApiVersions version we do not know gets a v0 answer naming our range.
        let body = ResponseKind::ApiVersions(unsupported_version_response());
        let mut errors = handlers::ErrorCounts::default();
        errors.add(kafka_protocol::error::ResponseError::UnsupportedVersion.code());
        let bytes = encode_response(correlation_id, 0, 0, &body)
            .map_err(|e| refuse(CloseReason::MalformedRequest, e))?;
        return Ok(Served {
            bytes: ResponseBytes::Whole(bytes),
            delivery: Delivery::Send,
            api_name: spec.name,
            api_version,
            errors,
            throttle_time_ms: 0,
            mute: None,
            handler_started,
            handler_time: handler_started.elapsed(),
            read_memory: ReadMemoryHold::default(),
            metric_alias: None,
            remote_time: Duration::ZERO,
        });
    }

    // A Metadata request naming many topics, or a Produce or Fetch naming many partitions, is
    // decided a chunk at a time (`metadata_chunks`, `produce_chunks`, `fetch_chunks`); a
    // CreateTopics naming many topics is decided from its frame (`topic_list_chunks`) where
    // this node decides it.
    let chunked = decode_guarded(|| match api_key {
        ApiKey::Metadata => super::metadata_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::Metadata)),
        ApiKey::Produce => super::produce_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::Produce)),
        ApiKey::Fetch => super::fetch_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::Fetch)),
        ApiKey::CreateTopics => {
            super::topic_list_chunks::scan::<CreateTopicsApi>(&frame, api_version)
                .transpose()
                .map(|c| c.map(ChunkedRequest::CreateTopics))
        }
        ApiKey::CreatePartitions => {
            super::topic_list_chunks::scan::<CreatePartitionsApi>(&frame, api_version)
                .transpose()
                .map(|c| c.map(ChunkedRequest::CreatePartitions))
        }
        ApiKey::ListOffsets => super::list_offsets_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::ListOffsets)),
        ApiKey::OffsetForLeaderEpoch => partition_list_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::OffsetForLeaderEpoch)),
        ApiKey::DescribeProducers => partition_list_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::DescribeProducers)),
        ApiKey::DeleteRecords => partition_list_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::DeleteRecords)),
        ApiKey::OffsetCommit => partition_list_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::OffsetCommit)),
        ApiKey::OffsetDelete => partition_list_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::OffsetDelete)),
        ApiKey::DescribeQuorum => partition_list_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::DescribeQuorum)),
        ApiKey::AlterUserScramCredentials => super::scram_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::AlterScram)),
        ApiKey::AlterClientQuotas => super::quota_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::AlterClientQuotas)),
        ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs => {
            let header = raw_frame.slice(..raw_frame.len() - frame.len());
            super::config_chunks::scan(&frame, api_key, api_version)
                .transpose()
                .map(|chunked| {
                    chunked.map(|mut chunked| {
                        chunked.forwarded_through(header, std::sync::Arc::clone(&settings.quorum));
                        if api_key == ApiKey::AlterConfigs {
                            ChunkedRequest::AlterConfigs(chunked)
                        } else {
                            ChunkedRequest::IncrementalAlterConfigs(chunked)
                        }
                    })
                })
        }
        ApiKey::ElectLeaders => super::election_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::ElectLeaders)),
        ApiKey::AlterPartitionReassignments => {
            super::reassignment_chunks::scan(&frame, api_version)
                .transpose()
                .map(|c| c.map(ChunkedRequest::AlterReassignments))
        }
        ApiKey::CreateAcls => super::acl_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::CreateAcls)),
        ApiKey::DeleteAcls => super::acl_chunks::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::DeleteAcls)),
        ApiKey::ConsumerGroupHeartbeat => {
            super::consumer_heartbeat_frame::scan(&frame, api_version)
                .transpose()
                .map(|c| c.map(ChunkedRequest::ConsumerGroupHeartbeat))
        }
        ApiKey::JoinGroup => super::join_group_frame::scan(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::JoinGroup)),
        ApiKey::AddRaftVoter => super::raft_voter_versions::scan_add_voter(&frame, api_version)
            .transpose()
            .map(|c| c.map(ChunkedRequest::AddRaftVoter)),
        // Where this node decides it, or checks it before it forwards it (an authorizer).
        ApiKey::DeleteTopics if !forward || handlers.authorizer.is_some() => {
            super::delete_topics_chunks::scan(&frame, api_version)
                .transpose()
                .map(|c| c.map(ChunkedRequest::DeleteTopics))
        }
        _ => Ok(None),
    })
    .map_err(|e| {
        refuse(
            CloseReason::MalformedRequest,
            format!("cannot decode {} v{api_version}: {e}", spec.name),
        )
    })?;
    let request = decode_guarded(|| {
        if let Some(chunked) = &chunked {
            return Ok(chunked.shell());
        }
        match super::raft_voter_versions::decode(api_key, &mut frame, api_version)
            .or_else(|| super::dedup_decode::decode(api_key, &mut frame, api_version))
        {
            Some(decoded) => decoded,
            None => RequestKind::decode(api_key, &mut frame, api_version),
        }
    })
    .map_err(|e| {
        refuse(
            CloseReason::MalformedRequest,
            format!("cannot decode {} v{api_version}: {e}", spec.name),
        )
    })?;
    let mut info = RequestInfo {
        api_version,
        client_id: quotas.client_id(header.client_id.as_deref()),
        listener_name: settings.listener_name.clone(),
        listener_kind: settings.listener_kind,
        principal: principal.clone(),
        client_host: client_host.clone(),
        fetch_quota: std::mem::take(&mut quotas.fetch),
        controller_failure,
        appends_queued: appends_queued.cloned(),
    };
    let decode_work = decode_started.elapsed();
    // A request the broker would not let through whole is handled here, resource by
    // resource, so the controller never sees the denied part. A CreateTopics or DeleteTopics
    // naming many topics is forwarded without its denied topics, whose answers the broker adds.
    if forward && handlers.authorizer.is_some() {
        let malformed = |e: anyhow::Error| {
            refuse(
                CloseReason::MalformedRequest,
                format!("cannot decode {} v{api_version}: {e}", spec.name),
            )
        };
        let (to_forward, denied) = match &chunked {
            Some(ChunkedRequest::CreateTopics(topics)) => {
                let mut topics = topics.clone();
                topics.authorize(handlers, &info).map_err(malformed)?;
                let (frame, denied) = topics.into_forwarded(&raw_frame).map_err(malformed)?;
                (Some(frame), denied.map(Appended::CreateTopics))
            }
            Some(ChunkedRequest::CreatePartitions(topics)) => {
                let mut topics = topics.clone();
                topics.authorize(handlers, &info).map_err(malformed)?;
                let (frame, denied) = topics.into_forwarded(&raw_frame).map_err(malformed)?;
                (Some(frame), denied.map(Appended::CreatePartitions))
            }
            Some(ChunkedRequest::DeleteTopics(names)) => {
                let mut names = names.clone();
                names.authorize(handlers, &info).map_err(malformed)?;
                match names.denied_count() {
                    0 => (Some(raw_frame.clone()), None),
                    _ => {
                        let without = names.without_denied(&raw_frame).map_err(malformed)?;
                        let denied =
                            super::delete_topics_chunks::DeletionResultsWriter::denied(names)
                                .map_err(malformed)?;
                        (Some(without), Some(Appended::DeleteTopics(denied)))
                    }
                }
            }
            _ if handlers::fully_authorized(handlers, &info, &request) => {
                (Some(raw_frame.clone()), None)
            }
            _ => (None, None),
        };
        if let Some(frame) = to_forward {
            let forwarded = forward_raw(
                &frame,
                spec,
                api_version,
                handlers,
                settings,
                client,
                quotas,
            )
            .await;
            match (forwarded, denied) {
                (Ok(served), None) => return Ok(served),
                (Ok(served), Some(appended)) => {
                    return with_denied_topics(served, appended, api_key, api_version)
                }
                (Err(error), _) => info.controller_failure = answered_here(error)?,
            }
        }
    }
    let ((handled, topics), handler_work) = match chunked {
        None => {
            let (handled, work) = PollTimed::new(handlers::handle(handlers, &info, request)).await;
            ((handled, None), work)
        }
        Some(chunked) => {
            let (handled, work) = PollTimed::new(chunked.handle(handlers, &info)).await;
            let handled = handled.map_err(|e| {
                refuse(
                    CloseReason::MalformedRequest,
                    format!("cannot decode {} v{api_version}: {e}", spec.name),
                )
            })?;
            (handled, work)
        }
    };
    let ApiResponse {
        mut body,
        errors,
        throttle_time_ms,
        delivery,
        encoded_list,
        read_memory,
        metric_alias,
        remote_time,
    } = handled.ok_or_else(|| {
        refuse(
            CloseReason::UnknownApiKey,
            format!("no handler for {}", spec.name),
        )
    })?;
    // Only Metadata's handler (all topics) and ApiVersions' write their lists themselves,
    // never a chunked one.
    let topics = match (topics, encoded_list) {
        (None, Some(list)) if api_key == ApiKey::Metadata => {
            Some(ListWriter::EncodedMetadata(list))
        }
        (None, Some(list)) if api_key == ApiKey::ApiVersions => {
            Some(ListWriter::EncodedApiKeys(list))
        }
        (topics, None) => topics,
        (_, Some(_)) => {
            return Err(refuse(
                CloseReason::MalformedRequest,
                format!(
                    "{} v{api_version}: an encoded list the front end cannot place",
                    spec.name
                ),
            ))
        }
    };
    quotas.fetch = std::mem::take(&mut info.fetch_quota);
    // Read once: the handler's time, and the time the quotas record at.
    let handler_done = Instant::now();
    let handler_time = handler_done.duration_since(handler_started);
    // The request quota charges the thread time spent on the request (decoding and the
    // handler's polls, not its waits for raft or the controller), as a percentage of one
    // thread-second; its throttle competes with the one the handler set (the
    // controller-mutation quota), and the larger one is sent and mutes the connection.
    // Produce with acks=0 is exempt from the request quota (it gets no response to carry it).
    let request_throttle = if delivery == Delivery::Send {
        handlers.quotas.request.shared.record_cached(
            &mut quotas.request,
            &principal.name,
            &info.client_id,
            request_time_percent(duration_nanos(decode_work + handler_work)),
            handler_done,
        )
    } else {
        0
    };
    let request_throttle = i32::try_from(request_throttle).unwrap_or(i32::MAX);
    // Produce: the whole request's bytes count against the produce byte-rate quota after the
    // append (acks=0 included); the append itself is never refused or delayed.
    let produce_throttle = if api_key == ApiKey::Produce {
        let throttle = handlers.quotas.produce.shared.record_cached(
            &mut quotas.produce,
            &principal.name,
            &info.client_id,
            wire_size as f64,
            handler_done,
        );
        i32::try_from(throttle).unwrap_or(i32::MAX)
    } else {
        0
    };
    // The handler's own throttle is Fetch's byte-rate quota or the controller-mutation quota.
    let handler_manager = if api_key == ApiKey::Fetch {
        &handlers.quotas.fetch
    } else {
        &handlers.quotas.controller_mutation
    };
    let candidates = [
        (throttle_time_ms, handler_manager),
        (request_throttle, &handlers.quotas.request),
        (produce_throttle, &handlers.quotas.produce),
    ];
    // The largest throttle is sent and mutes the connection, through its manager.
    let (largest, manager) = candidates
        .iter()
        .copied()
        .max_by_key(|(throttle, _)| *throttle)
        .unwrap_or((0, &handlers.quotas.request));
    let throttle_time_ms = raise_throttle_time(&mut body, largest).max(throttle_time_ms);
    let mute = (throttle_time_ms > 0).then(|| Mute {
        manager: manager.shared.clone(),
        client_id: info.client_id.to_string(),
        throttle_ms: throttle_time_ms as u64,
    });
    let header_version = api_key.response_header_version(api_version);
    let (encoded, encode_work) = timed(|| match (&mut body, topics) {
        (ResponseKind::Fetch(fetch), None) if super::fetch_parts::worth_parts(fetch) => {
            super::fetch_parts::encode(correlation_id, header_version, api_version, fetch)
                .map(ResponseBytes::Parts)
        }
        (body, topics) => {
            let bytes = encode_response_with_room(
                correlation_id,
                header_version,
                super::raft_voter_versions::response_layout(api_key, api_version),
                body,
                super::repeated::spliced_list_room(topics.as_ref()),
            )?;
            match topics {
                None => Ok(ResponseBytes::Whole(bytes)),
                Some(topics) => super::repeated::splice_topics(bytes, api_version, topics)
                    .map_err(|e| e.to_string()),
            }
        }
    });
    let bytes = encoded.map_err(|e| {
        tracing::error!(api = spec.name, api_version, error = %e, "cannot encode a response");
        refuse(CloseReason::MalformedRequest, e)
    })?;
    // Encoding happens after the throttle is decided; as Kafka records network-thread time
    // once the response is done, it is charged without throttling this response.
    handlers.quotas.request.shared.record_cached(
        &mut quotas.request,
        &principal.name,
        &info.client_id,
        request_time_percent(duration_nanos(encode_work)),
        handler_done + encode_work,
    );
    Ok(Served {
        bytes,
        delivery,
        api_name: spec.name,
        api_version,
        errors,
        throttle_time_ms,
        mute,
        handler_started,
        handler_time,
        read_memory,
        metric_alias,
        remote_time,
    })
}

/// What is left to do when a forwarded request brought no answer: answer it here, as this
/// node's controller actor would (`None`: NOT_CONTROLLER when another node leads) or failing
/// every part as the active controller failed it; or close the connection, as Kafka's broker
/// does when the controller cannot parse the request.
fn answered_here(
    error: ForwardError,
) -> Result<Option<gregor_actors::context::ControllerFailure>, Refusal> {
    match error {
        ForwardError::Unreachable => Ok(None),
        ForwardError::Failed(failure) => Ok(Some(failure)),
        ForwardError::Unsupported(detail) => Err(refuse(CloseReason::UnsupportedVersion, detail)),
    }
}

/// Sends a request frame to the active controller and builds what the client gets from its
/// answer (see [`ForwardError`] for what comes back without one).
async fn forward_raw(
    frame: &Bytes,
    spec: &handlers::ApiSpec,
    api_version: i16,
    handlers: &HandlerContext,
    settings: &ConnectionSettings,
    client: Client<'_>,
    quotas: &mut ConnectionCaches,
) -> Result<Served, ForwardError> {
    let Client {
        principal,
        host: client_host,
        ..
    } = client;
    let (api_key, api_name) = (spec.key, spec.name);
    let handler_started = Instant::now();
    let (client_id, decode_work) = timed(|| {
        decode_guarded(|| {
            RequestHeader::decode(
                &mut frame.clone(),
                api_key.request_header_version(api_version),
            )
        })
        .ok()
        .and_then(|header| header.client_id.map(|c| c.to_string()))
        .unwrap_or_default()
    });
    let caller = Caller {
        principal: (**principal).clone(),
        client_host: client_host.to_string(),
        client_id,
    };
    // The round trip to the controller is waiting, not work: only the polls are charged.
    let (answer, forward_work) =
        PollTimed::new(settings.quorum.forward(frame, Some(&caller))).await;
    let answer = answer?;
    let handler_done = Instant::now();
    let handler_time = handler_done.duration_since(handler_started);
    let broker_throttle = handlers.quotas.request.shared.record_cached(
        &mut quotas.request,
        &principal.name,
        &caller.client_id,
        request_time_percent(duration_nanos(forward_work + decode_work)),
        handler_done,
    );
    // A streamed answer's throttle time is in its first bytes, read already.
    let (head, streamed) = match answer {
        ForwardedAnswer::Whole(bytes) => (bytes, None),
        ForwardedAnswer::Streamed(streamed) => (streamed.head().clone(), Some(streamed)),
    };
    let (head, throttle_time_ms, mute) = throttle_forwarded(
        head,
        api_key,
        api_version,
        handlers,
        caller.client_id,
        broker_throttle,
    );
    let bytes = match streamed {
        None => ResponseBytes::Whole(head),
        Some(mut streamed) => {
            streamed.set_head(head);
            ResponseBytes::Forwarded(streamed)
        }
    };
    Ok(Served {
        bytes,
        delivery: Delivery::Send,
        api_name,
        api_version,
        errors: handlers::ErrorCounts::default(),
        throttle_time_ms,
        mute,
        handler_started,
        handler_time,
        read_memory: ReadMemoryHold::default(),
        metric_alias: None,
        remote_time: Duration::ZERO,
    })
}

/// A forwarded CreateTopics or DeleteTopics answer with the answers of the topics the broker
/// denied (`appended`) added after the controller's.
fn with_denied_topics(
    mut served: Served,
    appended: super::forwarded::Appended,
    api_key: ApiKey,
    api_version: i16,
) -> Result<Served, Refusal> {
    let failed = |detail: String| {
        tracing::warn!(%detail, ?api_key, "a forwarded answer could not be extended");
        refuse(CloseReason::MalformedRequest, detail)
    };
    served.errors.add_times(
        kafka_protocol::error::ResponseError::TopicAuthorizationFailed.code(),
        appended.answers() as u64,
    );
    let source = match std::mem::replace(&mut served.bytes, ResponseBytes::Whole(Bytes::new())) {
        ResponseBytes::Whole(bytes) => ForwardedAnswer::Whole(bytes),
        ResponseBytes::Forwarded(answer) => ForwardedAnswer::Streamed(answer),
        other => {
            return Err(failed(format!(
                "a forwarded answer of another kind: {other:?}"
            )))
        }
    };
    let list_at = throttle_offset(source.first_bytes(), api_key, api_version)
        .ok_or_else(|| failed("a forwarded answer without its throttle time".to_owned()))?
        + 4;
    let flexible = api_key.response_header_version(api_version) >= 1;
    served.bytes = ResponseBytes::Extended(Box::new(
        super::forwarded::Extended::new(source, flexible, list_at, appended)
            .map_err(|e| failed(e.to_string()))?,
    ));
    Ok(served)
}

/// The controller side of an Envelope (Kafka's `EnvelopeUtils.handleEnvelopeRequest`): the
/// inner request is served as the client the envelope names, from its address, and its answer
/// goes back inside the EnvelopeResponse. `allowed`: the sender is a known node whose
/// principal may send private RPCs (else CLUSTER_AUTHORIZATION_FAILED, as Kafka answers a
/// principal without CLUSTER_ACTION). The inner answer is never muted for: the broker
/// throttles its client.
async fn serve_envelope(
    mut frame: Bytes,
    handlers: &HandlerContext,
    settings: &ConnectionSettings,
    allowed: bool,
) -> Result<Served, Refusal> {
    use kafka_protocol::error::ResponseError;
    use kafka_protocol::messages::{EnvelopeRequest, EnvelopeResponse};
    let handler_started = Instant::now();
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let (header, envelope) = decode_guarded(|| {
        let header = RequestHeader::decode(
            &mut frame,
            ApiKey::Envelope.request_header_version(api_version),
        )?;
        Ok((header, EnvelopeRequest::decode(&mut frame, api_version)?))
    })
    .map_err(|e| {
        refuse(
            CloseReason::MalformedRequest,
            format!("cannot decode Envelope v{api_version}: {e}"),
        )
    })?;
    let mut inner_throttle = 0;
    let mut streamed = None;
    let answer = match open_envelope(&envelope, allowed) {
        Err((error, detail)) => {
            tracing::info!(listener = %settings.listener_name, code = error.code(), %detail, "refusing an envelope");
            EnvelopeResponse::default().with_error_code(error.code())
        }
        Ok((principal, client_host)) => {
            let (principal, client_host) = (std::sync::Arc::new(principal), client_host.into());
            let inner = envelope.request_data.clone();
            match Box::pin(process(
                inner,
                handlers,
                settings,
                Client {
                    principal: &principal,
                    host: &client_host,
                    appends_queued: None,
                },
                false,
                // The connection carries many clients: no cached sensor fits all of them.
                &mut ConnectionCaches::default(),
            ))
            .await
            {
                Ok(served) if served.delivery == Delivery::Send => {
                    inner_throttle = served.throttle_time_ms;
                    match served.bytes {
                        ResponseBytes::Whole(bytes) => EnvelopeResponse::default()
                            .with_response_data(Some(bytes.slice(4.min(bytes.len())..))),
                        // An answer written as it is encoded goes into the envelope the same
                        // way, never held whole.
                        inner => {
                            streamed = Some(inner);
                            EnvelopeResponse::default().with_response_data(Some(Bytes::new()))
                        }
                    }
                }
                Ok(_) => EnvelopeResponse::default()
                    .with_error_code(ResponseError::InvalidRequest.code()),
                // Kafka answers UNSUPPORTED_VERSION for an inner request it cannot parse, to
                // tell it apart from a malformed envelope.
                Err(refusal) => {
                    tracing::info!(listener = %settings.listener_name, %principal, detail = %refusal.detail, "refusing an envelope's request");
                    EnvelopeResponse::default()
                        .with_error_code(ResponseError::UnsupportedVersion.code())
                }
            }
        }
    };
    let mut errors = handlers::ErrorCounts::default();
    if answer.error_code != 0 {
        errors.add(answer.error_code);
    }
    let bytes = encode_response(
        header.correlation_id,
        ApiKey::Envelope.response_header_version(api_version),
        api_version,
        &ResponseKind::Envelope(answer),
    )
    .map_err(|e| refuse(CloseReason::MalformedRequest, e))?;
    let bytes = match streamed {
        None => ResponseBytes::Whole(bytes),
        Some(inner) => ResponseBytes::Enveloped(Box::new(
            super::forwarded::Enveloped::new(&bytes, inner)
                .map_err(|e| refuse(CloseReason::MalformedRequest, e))?,
        )),
    };
    Ok(Served {
        bytes,
        delivery: Delivery::Send,
        api_name: "Envelope",
        api_version,
        errors,
        throttle_time_ms: inner_throttle,
        mute: None,
        handler_started,
        handler_time: handler_started.elapsed(),
        read_memory: ReadMemoryHold::default(),
        metric_alias: None,
        remote_time: Duration::ZERO,
    })
}

/// The client an envelope speaks for (principal, address in Kafka's form), or the error Kafka
/// answers it with and why.
fn open_envelope(
    envelope: &kafka_protocol::messages::EnvelopeRequest,
    allowed: bool,
) -> Result<(Principal, String), (kafka_protocol::error::ResponseError, String)> {
    use kafka_protocol::error::ResponseError;
    if !allowed {
        return Err((
            ResponseError::ClusterAuthorizationFailed,
            "an envelope from a connection that is not a known node allowed CLUSTER_ACTION".into(),
        ));
    }
    let principal = envelope
        .request_principal
        .as_deref()
        .ok_or_else(|| "no principal".to_owned())
        .and_then(super::envelope::decode_principal)
        .map_err(|e| {
            (
                ResponseError::PrincipalDeserializationFailure,
                format!("Failed to deserialize client principal from envelope: {e}"),
            )
        })?;
    let client_host =
        super::envelope::decode_address(&envelope.client_host_address).ok_or_else(|| {
            (
                ResponseError::InvalidRequest,
                "Failed to parse client address from envelope".to_owned(),
            )
        })?;
    let inner_key = envelope
        .request_data
        .get(..2)
        .map(|k| i16::from_be_bytes([k[0], k[1]]))
        .ok_or_else(|| {
            (
                ResponseError::UnsupportedVersion,
                "Failed to parse request header from envelope".to_owned(),
            )
        })?;
    match ApiKey::try_from(inner_key) {
        Ok(key) if crate::quorum::service::is_forwardable(key) => Ok((principal, client_host)),
        _ => Err((
            ResponseError::InvalidRequest,
            format!("API {inner_key} is not enabled or is not eligible for forwarding"),
        )),
    }
}

/// Kafka's broker side of a forwarded request (`sendForwardedResponse`): the answer carries
/// the larger of the controller's throttle and this broker's own request-quota throttle
/// (`broker_throttle`, already recorded), and
/// the broker mutes the client's connection for it through its request quota manager.
fn throttle_forwarded(
    mut bytes: Bytes,
    api_key: ApiKey,
    api_version: i16,
    handlers: &HandlerContext,
    client_id: String,
    broker_throttle: u64,
) -> (Bytes, i32, Option<Mute>) {
    let broker_throttle = i32::try_from(broker_throttle).unwrap_or(i32::MAX);
    let Some(offset) = throttle_offset(&bytes, api_key, api_version) else {
        return (bytes, 0, None);
    };
    let controller_throttle = bytes
        .get(offset..offset + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, i32::from_be_bytes);
    let throttle_time_ms = controller_throttle.max(broker_throttle);
    if throttle_time_ms > controller_throttle {
        let mut patched = BytesMut::from(&bytes[..]);
        patched[offset..offset + 4].copy_from_slice(&throttle_time_ms.to_be_bytes());
        bytes = patched.freeze();
    }
    let mute = (throttle_time_ms > 0).then(|| Mute {
        manager: handlers.quotas.request.shared.clone(),
        client_id,
        throttle_ms: throttle_time_ms as u64,
    });
    (bytes, throttle_time_ms, mute)
}

/// Where `throttle_time_ms` sits in a response frame (size prefix included), for the forwarded
/// APIs whose body starts with it; `None` for the others (DescribeQuorum has no such field).
fn throttle_offset(frame: &Bytes, api_key: ApiKey, api_version: i16) -> Option<usize> {
    let body_starts_with_throttle = match api_key {
        ApiKey::CreateTopics => api_version >= 2,
        ApiKey::DeleteTopics => api_version >= 1,
        ApiKey::CreatePartitions
        | ApiKey::AlterClientQuotas
        | ApiKey::AlterUserScramCredentials
        | ApiKey::CreateAcls
        | ApiKey::DeleteAcls
        | ApiKey::UnregisterBroker
        | ApiKey::UpdateFeatures
        | ApiKey::ElectLeaders
        | ApiKey::AlterPartitionReassignments
        | ApiKey::ListPartitionReassignments
        | ApiKey::AddRaftVoter
        | ApiKey::RemoveRaftVoter => true,
        _ => false,
    };
    if !body_starts_with_throttle {
        return None;
    }
    let mut rest = frame.slice(4.min(frame.len())..);
    let before = rest.len();
    decode_guarded(|| {
        ResponseHeader::decode(&mut rest, api_key.response_header_version(api_version))
    })
    .ok()?;
    let offset = 4 + before - rest.len();
    (rest.len() >= 4).then_some(offset)
}

fn duration_nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Runs a decoder, turning a panic inside it into an error: a frame must never take the node
/// down, whatever bytes it holds.
pub(super) fn decode_guarded<T>(decode: impl FnOnce() -> anyhow::Result<T>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(decode)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("the decoder panicked".to_owned()),
    }
}

/// Encodes `size | response header | body` for one response.
pub(super) fn encode_response(
    correlation_id: i32,
    header_version: i16,
    api_version: i16,
    body: &ResponseKind,
) -> Result<Bytes, String> {
    encode_response_with_room(correlation_id, header_version, api_version, body, 0)
}

/// [`encode_response`] into a buffer with `room` bytes to spare, for a list spliced in later.
fn encode_response_with_room(
    correlation_id: i32,
    header_version: i16,
    api_version: i16,
    body: &ResponseKind,
    room: usize,
) -> Result<Bytes, String> {
    // Size prefix, correlation id, header tag buffer.
    const HEADER: usize = 9;
    let capacity = match body {
        ResponseKind::Metadata(metadata) => HEADER + handlers::encoded_size_bound(metadata),
        // Every client's first request, and larger than the default: sized exactly.
        ResponseKind::ApiVersions(versions) => versions
            .compute_size(api_version)
            .map_or(256, |size| HEADER + size),
        // Records make most of it: sized once instead of grown by doubling.
        ResponseKind::Fetch(fetch) => fetch
            .compute_size(api_version)
            .map_or(256, |size| HEADER + size),
        _ => 256,
    };
    let mut out = BytesMut::with_capacity(capacity + room);
    out.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut out, header_version)
        .map_err(|e| format!("response header: {e}"))?;
    body.encode(&mut out, api_version)
        .map_err(|e| format!("response body: {e}"))?;
    let size = i32::try_from(out.len() - 4).map_err(|_| "response larger than 2 GiB".to_owned())?;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{CreateTopicsResponse, DescribeQuorumResponse};

    use super::*;

    fn throttle_at(frame: &Bytes, key: ApiKey, version: i16) -> Option<i32> {
        let offset = throttle_offset(frame, key, version)?;
        Some(i32::from_be_bytes(
            frame[offset..offset + 4].try_into().ok()?,
        ))
    }

    #[test]
    fn envelopes_are_opened_or_refused_with_kafkas_errors() -> Result<(), String> {
        use kafka_protocol::error::ResponseError;
        use kafka_protocol::messages::EnvelopeRequest;
        let alice = Principal {
            principal_type: "User".into(),
            name: "alice".into(),
        };
        let create_topics = Bytes::from_static(&[0, 19, 0, 7, 0, 0, 0, 1]);
        let good = EnvelopeRequest::default()
            .with_request_data(create_topics.clone())
            .with_request_principal(Some(super::super::envelope::encode_principal(&alice)?))
            .with_client_host_address(Bytes::from_static(&[10, 0, 0, 7]));
        let error = |envelope: &EnvelopeRequest, allowed| {
            open_envelope(envelope, allowed).err().map(|(e, _)| e)
        };
        assert_eq!(
            open_envelope(&good, true).ok(),
            Some((alice, "/10.0.0.7".to_owned()))
        );
        assert_eq!(
            error(&good, false),
            Some(ResponseError::ClusterAuthorizationFailed)
        );
        let principal = good
            .clone()
            .with_request_principal(Some(Bytes::from_static(b"\x00\x07nonsense")));
        assert_eq!(
            error(&principal, true),
            Some(ResponseError::PrincipalDeserializationFailure)
        );
        let address = good
            .clone()
            .with_client_host_address(Bytes::from_static(&[10, 0, 0]));
        assert_eq!(error(&address, true), Some(ResponseError::InvalidRequest));
        // Metadata is not forwarded; an Envelope inside an Envelope neither.
        for key in [3_u8, 58] {
            let inner = good
                .clone()
                .with_request_data(Bytes::copy_from_slice(&[0, key, 0, 0, 0, 0, 0, 1]));
            assert_eq!(error(&inner, true), Some(ResponseError::InvalidRequest));
        }
        let empty = good.clone().with_request_data(Bytes::new());
        assert_eq!(error(&empty, true), Some(ResponseError::UnsupportedVersion));
        Ok(())
    }

    /// The handler sends ApiVersions' api keys encoded once, spliced into the rest of the
    /// answer: the bytes must be those of the whole answer encoded at once, throttle time
    /// and features included, at every version.
    #[test]
    fn an_api_versions_answer_with_its_keys_encoded_apart_is_the_same_bytes() -> anyhow::Result<()>
    {
        use kafka_protocol::messages::api_versions_response::{
            ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
        };
        use kafka_protocol::messages::ApiVersionsResponse;
        use kafka_protocol::protocol::{Encodable, StrBytes};
        let keys: Vec<ApiVersion> = (0..70)
            .map(|key| {
                ApiVersion::default()
                    .with_api_key(key)
                    .with_min_version(key % 2)
                    .with_max_version(key % 7 + 1)
            })
            .collect();
        let feature = StrBytes::from_static_str("metadata.version");
        let answer = ApiVersionsResponse::default()
            .with_throttle_time_ms(1234)
            .with_supported_features(vec![SupportedFeatureKey::default()
                .with_name(feature.clone())
                .with_min_version(7)
                .with_max_version(27)])
            .with_finalized_features_epoch(42)
            .with_finalized_features(vec![FinalizedFeatureKey::default()
                .with_name(feature)
                .with_min_version_level(27)
                .with_max_version_level(27)]);
        for version in 0..=4 {
            let whole = ResponseKind::ApiVersions(answer.clone().with_api_keys(keys.clone()));
            let expected = encode_response(9, 0, version, &whole).map_err(anyhow::Error::msg)?;
            let mut list = BytesMut::new();
            for key in &keys {
                key.encode(&mut list, version)?;
            }
            let list = handlers::EncodedList {
                count: keys.len(),
                bytes: list.freeze(),
            };
            let list = || ListWriter::EncodedApiKeys(list.clone());
            // With room left for the list (in place) and without (copied).
            let room = super::super::repeated::spliced_list_room(Some(&list()));
            assert!(room > 0);
            for room in [room, 0] {
                let stand_in = ResponseKind::ApiVersions(answer.clone());
                let stand_in = encode_response_with_room(9, 0, version, &stand_in, room)
                    .map_err(anyhow::Error::msg)?;
                let spliced = super::super::repeated::splice_topics(stand_in, version, list())?;
                match spliced {
                    ResponseBytes::Whole(bytes) => {
                        assert_eq!(bytes, expected, "ApiVersions v{version}, room {room}")
                    }
                    other => anyhow::bail!("v{version}: spliced into {other:?}, not one buffer"),
                }
            }
        }
        Ok(())
    }

    #[test]
    fn forwarded_throttle_is_found_behind_either_header() -> Result<(), String> {
        let body =
            ResponseKind::CreateTopics(CreateTopicsResponse::default().with_throttle_time_ms(1234));
        for version in [2, 4, 5, 7] {
            let header = ApiKey::CreateTopics.response_header_version(version);
            let frame = encode_response(9, header, version, &body)?;
            assert_eq!(
                throttle_at(&frame, ApiKey::CreateTopics, version),
                Some(1234),
                "CreateTopics v{version}"
            );
        }
        let quorum = ResponseKind::DescribeQuorum(DescribeQuorumResponse::default());
        let frame = encode_response(9, 1, 2, &quorum)?;
        assert_eq!(throttle_offset(&frame, ApiKey::DescribeQuorum, 2), None);
        Ok(())
    }
}
