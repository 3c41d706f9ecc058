//! IncrementalAlterConfigs and AlterConfigs requests listing many resources, decided without
//! decoding their list and answered as the answer is written.
//!
//! A resource naming one topic and one config is twenty bytes on the wire, but a decoded
//! `AlterConfigsResource`, the controller's change, its answer and its error message cost 35
//! to 45 times that. Here the resources stay in the frame: a scan checks the request as the
//! crate's decoder would and sorts the resources' offsets by type and name, keeping those named
//! more than once (Kafka refuses every copy); the handler and the controller read the
//! resources one at a time (`ListedConfigResources`) and keep a route and a code for each
//! (`handlers::ListedConfigAnswers`), and the answer, one result per resource in request order,
//! is written from the frame and those codes, a failure's message found again as it is written.

use std::sync::Arc;

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use hashbrown::HashMap;
use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsResource as LegacyResource, AlterableConfig as LegacyConfig,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource as IncrementalResource, AlterableConfig as IncrementalConfig,
};
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, ApiKey, RequestHeader,
    ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use futures::future::BoxFuture;
use gregor_actors::context::{Caller, ControllerFailure, Forwarded, HandlerContext, RequestInfo};
use gregor_actors::controller::logic::configs::{
    ConfigResource, DecidedAgainst, ListedConfigDecision, ListedConfigResources, Route,
};
use gregor_actors::handlers::configs::{alter_listed_configs, ListedConfigAnswers};
use gregor_actors::handlers::ApiResponse;
use kafka_protocol::error::ResponseError;

use super::dedup_decode::{array_length, need, request_array_length, string};
use super::forwarded::ForwardedAnswer;
use super::metadata_chunks::{bit, set_bit};
use super::repeated::{skip_tagged_fields, uvarint_at, PieceSource, PiecesWriter};
use crate::quorum::QuorumService;

/// Resources answered per piece of the answer; a request with no more is decoded whole.
pub const CHUNK: usize = 1024;

/// The first flexible version of each API.
fn flexible(legacy: bool, version: i16) -> bool {
    version >= if legacy { 2 } else { 1 }
}

/// Which of the two APIs `api_key` is, at a version both serve; `None` for any other.
fn legacy_api(api_key: ApiKey, version: i16) -> Option<bool> {
    match api_key {
        ApiKey::AlterConfigs if (0..=2).contains(&version) => Some(true),
        ApiKey::IncrementalAlterConfigs if (0..=1).contains(&version) => Some(false),
        _ => None,
    }
}

/// Whether `frame` (header included) is a config alteration listing more than [`CHUNK`]
/// resources, which [`scan`] reads, so its repeats are left in it.
pub fn is_long(frame: &Bytes, api_key: ApiKey, version: i16) -> bool {
    let Some(legacy) = legacy_api(api_key, version) else {
        return false;
    };
    let mut rest = frame.clone();
    RequestHeader::decode(&mut rest, api_key.request_header_version(version)).is_ok()
        && request_array_length(&mut rest, flexible(legacy, version))
            .is_ok_and(|count| count > CHUNK as i64)
}

/// A config alteration whose resources stay in the frame.
pub struct ChunkedConfigs {
    /// The request body.
    body: Bytes,
    version: i16,
    legacy: bool,
    /// Where the resources start in `body` (after their list's length), and how many.
    resources_at: usize,
    count: usize,
    validate_only: bool,
    /// One bit per resource kept (not a copy of the one before it): set when another resource
    /// names its type and name.
    duplicated: Vec<u64>,
    /// One bit per resource: set when it is the same bytes as the one before (so named twice).
    copies: Vec<u64>,
    /// How the resources the controller decides reach it when it runs elsewhere.
    forwarding: Option<Forwarding>,
}

/// What handing resources to the active controller elsewhere needs: the request's header as
/// it came (the client's id, the version) and this node's quorum service.
struct Forwarding {
    header: Bytes,
    quorum: Arc<QuorumService>,
}

/// Marks an offset, while the scan sorts them, as followed by copies of its resource.
const FOLLOWED: u32 = 1 << 31;

/// Reads `body` (an AlterConfigs or IncrementalAlterConfigs request body) when it lists more
/// than [`CHUNK`] resources; `None` for other requests, decoded whole. The request is read to
/// its end first, so a malformed one is refused whole, as the crate's decoder refuses it.
pub fn scan(body: &Bytes, api_key: ApiKey, version: i16) -> Option<anyhow::Result<ChunkedConfigs>> {
    let legacy = legacy_api(api_key, version)?;
    let mut rest = body.clone();
    let count = request_array_length(&mut rest, flexible(legacy, version)).ok()?;
    if count <= CHUNK as i64 {
        return None;
    }
    Some(scan_resources(
        body,
        body.len() - rest.len(),
        count as usize,
        legacy,
        version,
    ))
}

fn scan_resources(
    body: &Bytes,
    resources_at: usize,
    count: usize,
    legacy: bool,
    version: i16,
) -> anyhow::Result<ChunkedConfigs> {
    let flexible = flexible(legacy, version);
    if body.len() >= FOLLOWED as usize {
        bail!("a config alteration frame over 2 GiB");
    }
    let mut rest = body.slice(resources_at..);
    // Each resource's offset, four bytes where a decoded one costs a hundred times that. Sized
    // once (a resource is at least four bytes): a growing vector is copied, leaving holes. A
    // resource the same bytes as the one before repeats it without an offset of its own (a
    // frame of one resource over and over costs bits, not four bytes per resource).
    let mut offsets: Vec<u32> = Vec::with_capacity(count.min(body.len() / 4));
    let mut copies = vec![0u64; count.div_ceil(64)];
    let mut previous = Bytes::new();
    for index in 0..count {
        let at = (body.len() - rest.len()) as u32;
        let mut resource = rest.clone();
        read_resource(&mut rest, version, legacy)?;
        resource.truncate(resource.len() - rest.len());
        if index > 0 && resource == previous {
            set_bit(&mut copies, index);
            if let Some(last) = offsets.last_mut() {
                *last |= FOLLOWED;
            }
            continue;
        }
        offsets.push(at);
        previous = resource;
    }
    let validate_only = match rest.first() {
        Some(byte) => *byte != 0,
        None => bail!("truncated: a config alteration without validate_only"),
    };
    let mut tail = rest.slice(1..);
    skip_tagged_fields(&mut tail, flexible)?;
    let key = |offset: u32| resource_key(body, (offset & !FOLLOWED) as usize, flexible);
    offsets.sort_unstable_by(|a, b| key(*a).cmp(&key(*b)).then(a.cmp(b)));
    // Every resource whose key another names too (a copy after it, or another offset), kept
    // in place of the sorted offsets.
    let mut kept = 0;
    let mut at = 0;
    while at < offsets.len() {
        let mut end = at + 1;
        while end < offsets.len() && key(offsets[end]) == key(offsets[at]) {
            end += 1;
        }
        if end - at > 1 || offsets[at] & FOLLOWED != 0 {
            for from in at..end {
                offsets[kept] = offsets[from] & !FOLLOWED;
                kept += 1;
            }
        }
        at = end;
    }
    offsets.truncate(kept);
    offsets.sort_unstable();
    let mut request = ChunkedConfigs {
        body: body.clone(),
        version,
        legacy,
        resources_at,
        count,
        validate_only,
        duplicated: Vec::new(),
        copies,
        forwarding: None,
    };
    // The offsets become a bit per kept resource.
    let mut duplicated = vec![0u64; request.kept().div_ceil(64)];
    let mut named_again = offsets.into_iter().peekable();
    let mut cursor = request.cursor();
    while named_again.peek().is_some() {
        match cursor.next()? {
            Next::Kept(kept, _, _) => {
                if named_again.next_if_eq(&cursor.last_offset).is_some() {
                    set_bit(&mut duplicated, kept);
                }
            }
            Next::Copy => {}
            Next::End => break,
        }
    }
    request.duplicated = duplicated;
    Ok(request)
}

/// The type and name of the resource at `at`, as the frame holds them (read whole before).
fn resource_key(body: &[u8], at: usize, flexible: bool) -> (u8, &[u8]) {
    let resource_type = body.get(at).copied().unwrap_or_default();
    let mut at = at + 1;
    let length = if flexible {
        (uvarint_at(body, &mut at) as usize).saturating_sub(1)
    } else {
        let length = body
            .get(at..at + 2)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]) as usize);
        at += 2;
        length
    };
    (resource_type, body.get(at..at + length).unwrap_or_default())
}

/// One resource as read from the frame.
enum Resource {
    Incremental(IncrementalResource),
    Legacy(LegacyResource),
}

impl Resource {
    fn as_listed(&self) -> ConfigResource<'_> {
        match self {
            Resource::Incremental(resource) => ConfigResource::Incremental(resource),
            Resource::Legacy(resource) => ConfigResource::Legacy(resource),
        }
    }
}

/// Reads one resource whole but for its configs' repeats: each key's first two copies are
/// kept (a key named twice refuses the resource, whatever else the copies say), so a resource
/// repeating one key costs no more than two copies.
fn read_resource(bytes: &mut Bytes, version: i16, legacy: bool) -> anyhow::Result<Resource> {
    let flexible = flexible(legacy, version);
    need(bytes, 1)?;
    let resource_type = bytes.get_i8();
    let resource_name = string(bytes, flexible, "a resource name")?;
    let count = usize::try_from(array_length(bytes, flexible)?)
        .context("a resource's configs must not be null")?;
    let resource = if legacy {
        Resource::Legacy(
            LegacyResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(resource_name)
                .with_configs(read_configs(bytes, version, count, |c: &LegacyConfig| {
                    &c.name
                })?),
        )
    } else {
        Resource::Incremental(
            IncrementalResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(resource_name)
                .with_configs(read_configs(
                    bytes,
                    version,
                    count,
                    |c: &IncrementalConfig| &c.name,
                )?),
        )
    };
    skip_tagged_fields(bytes, flexible)?;
    Ok(resource)
}

/// Reads `count` configs, keeping each key's (`name`'s) first two copies.
fn read_configs<C: Decodable>(
    bytes: &mut Bytes,
    version: i16,
    count: usize,
    name: impl Fn(&C) -> &StrBytes,
) -> anyhow::Result<Vec<C>> {
    let mut copies: HashMap<StrBytes, u8> = HashMap::new();
    let mut configs = Vec::new();
    for _ in 0..count {
        let config = C::decode(bytes, version)?;
        let seen = copies.entry(name(&config).clone()).or_insert(0);
        *seen += 1;
        if *seen <= 2 {
            configs.push(config);
        }
    }
    Ok(configs)
}

impl ChunkedConfigs {
    /// Lets the resources the controller decides be handed to it, when it runs elsewhere, with
    /// `header` (the request's, as it came) through `quorum`.
    pub(crate) fn forwarded_through(&mut self, header: Bytes, quorum: Arc<QuorumService>) {
        self.forwarding = Some(Forwarding { header, quorum });
    }

    /// The request frame (header included, no size prefix) of the resources routed to the
    /// controller alone, each as its bytes came.
    fn decided_frame(
        &self,
        header: &[u8],
        routes: &[Route],
        validate_only: bool,
    ) -> anyhow::Result<BytesMut> {
        let flexible = flexible(self.legacy, self.version);
        let decided = routes.iter().filter(|r| **r == Route::Decided).count();
        // Sized once, to at most the request: a growing buffer would hold its last two sizes
        // at once. The pages past what is written are never touched.
        let mut frame = BytesMut::with_capacity(header.len() + self.body.len() + 8);
        frame.extend_from_slice(header);
        super::repeated::put_array_length(&mut frame, decided, flexible)?;
        let mut cursor = self.cursor();
        loop {
            match cursor.next()? {
                Next::Kept(kept, _, _) if routes.get(kept) == Some(&Route::Decided) => {
                    let at = cursor.last_offset as usize;
                    let resource = self
                        .body
                        .get(at..at + cursor.last_len)
                        .context("a resource past the frame")?;
                    frame.extend_from_slice(resource);
                }
                Next::Kept(..) | Next::Copy => {}
                Next::End => break,
            }
        }
        frame.put_u8(u8::from(validate_only));
        if flexible {
            frame.put_u8(0);
        }
        Ok(frame)
    }

    fn cursor(&self) -> Cursor<'_> {
        Cursor {
            request: self,
            rest: self.body.slice(self.resources_at..),
            index: 0,
            kept: 0,
            last_len: 0,
            last_offset: 0,
        }
    }

    /// How many resources are not copies of the one before them.
    fn kept(&self) -> usize {
        self.count
            - self
                .copies
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum::<usize>()
    }
}

/// The resources of a request in order.
struct Cursor<'a> {
    request: &'a ChunkedConfigs,
    rest: Bytes,
    index: usize,
    kept: usize,
    /// The length and offset of the last resource read.
    last_len: usize,
    last_offset: u32,
}

/// What comes next in a [`Cursor`].
enum Next {
    /// A resource (its place among those kept, its content, whether its type and name are
    /// named again).
    Kept(usize, Resource, bool),
    /// A copy of the resource before it, answered as that one.
    Copy,
    End,
}

impl Cursor<'_> {
    fn next(&mut self) -> anyhow::Result<Next> {
        let request = self.request;
        if self.index == request.count {
            return Ok(Next::End);
        }
        self.index += 1;
        if bit(&request.copies, self.index - 1) {
            need(&self.rest, self.last_len)?;
            self.rest.advance(self.last_len);
            return Ok(Next::Copy);
        }
        self.last_offset = (request.body.len() - self.rest.len()) as u32;
        let before = self.rest.len();
        let resource = read_resource(&mut self.rest, request.version, request.legacy)?;
        self.last_len = before - self.rest.len();
        self.kept += 1;
        let duplicated = bit(&request.duplicated, self.kept - 1);
        Ok(Next::Kept(self.kept - 1, resource, duplicated))
    }
}

/// A copy is answered as the resource before it, so the handler and the controller see each
/// run of copies once.
impl ListedConfigResources for ChunkedConfigs {
    fn count(&self) -> usize {
        self.kept()
    }

    fn legacy(&self) -> bool {
        self.legacy
    }

    fn each(
        &self,
        visit: &mut dyn FnMut(usize, ConfigResource<'_>, bool) -> bool,
    ) -> Result<(), String> {
        let mut cursor = self.cursor();
        loop {
            match cursor.next().map_err(|e| e.to_string())? {
                Next::Kept(kept, resource, duplicated) => {
                    if !visit(kept, resource.as_listed(), duplicated) {
                        return Ok(());
                    }
                }
                Next::Copy => {}
                Next::End => return Ok(()),
            }
        }
    }

    fn forward_decided(
        self: Arc<Self>,
        routes: Arc<Vec<Route>>,
        validate_only: bool,
        caller: Caller,
        against: DecidedAgainst,
    ) -> Option<BoxFuture<'static, Forwarded<ListedConfigDecision>>> {
        let forwarding = self.forwarding.as_ref()?;
        let (header, quorum) = (forwarding.header.clone(), Arc::clone(&forwarding.quorum));
        Some(Box::pin(async move {
            let failed = |error: anyhow::Error| {
                tracing::error!(%error, "a config alteration could not be handed to the controller");
                Forwarded::Failed(ControllerFailure {
                    error: ResponseError::UnknownServerError,
                    message: format!(
                        "This broker could not forward the request to the active controller: {error}"
                    ),
                })
            };
            let frame = match self.decided_frame(&header, &routes, validate_only) {
                Ok(frame) => frame,
                Err(error) => return failed(error),
            };
            let answer = match quorum.forward(&frame, Some(&caller)).await {
                Ok(answer) => answer,
                Err(error) => return error.into_forwarded(),
            };
            drop(frame);
            let mut reader = DecidedAnswers::new(&self, &routes, &against);
            let read = match answer {
                ForwardedAnswer::Whole(bytes) => reader.feed(&bytes),
                ForwardedAnswer::Streamed(answer) => answer
                    .write_to(&mut reader)
                    .await
                    .map_err(anyhow::Error::from),
            };
            match read.and_then(|()| reader.finish()) {
                Ok(decision) => Forwarded::Answered(decision),
                Err(error) => failed(error),
            }
        }))
    }
}

/// The active controller's answer to the decided resources, read as it arrives (it can be
/// several times the request: each failure has its message): a code kept per resource, and
/// a message only where this node's image does not give the same again.
struct DecidedAnswers<'a> {
    request: &'a ChunkedConfigs,
    routes: &'a [Route],
    against: &'a DecidedAgainst,
    cursor: Cursor<'a>,
    /// Bytes read but not yet taken apart.
    buffer: BytesMut,
    /// Answers still to read once the answer's head is read.
    left: Option<usize>,
    decision: ListedConfigDecision,
}

impl<'a> DecidedAnswers<'a> {
    fn new(request: &'a ChunkedConfigs, routes: &'a [Route], against: &'a DecidedAgainst) -> Self {
        DecidedAnswers {
            request,
            routes,
            against,
            cursor: request.cursor(),
            buffer: BytesMut::new(),
            left: None,
            decision: ListedConfigDecision {
                codes: Vec::with_capacity(routes.len()),
                ..Default::default()
            },
        }
    }

    fn api_key(&self) -> ApiKey {
        if self.request.legacy {
            ApiKey::AlterConfigs
        } else {
            ApiKey::IncrementalAlterConfigs
        }
    }

    /// Takes apart what `bytes` completes: the head (size, header, throttle time, the list's
    /// length), then each whole answer. A part not yet whole waits for more.
    fn feed(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        self.buffer.extend_from_slice(bytes);
        let mut rest = std::mem::take(&mut self.buffer).freeze();
        let version = self.request.version;
        if self.left.is_none() {
            let mut head = rest.clone();
            let read = (|| -> anyhow::Result<usize> {
                need(&head, 4)?;
                head.advance(4);
                ResponseHeader::decode(&mut head, self.api_key().response_header_version(version))?;
                need(&head, 4)?;
                head.advance(4);
                let count = array_length(&mut head, flexible(self.request.legacy, version))?;
                usize::try_from(count).context("a null list of answers")
            })();
            match read {
                Ok(count) => {
                    let decided = self.routes.iter().filter(|r| **r == Route::Decided).count();
                    if count != decided {
                        bail!("{count} answers to {decided} resources");
                    }
                    self.left = Some(count);
                    rest = head;
                }
                Err(_) => {
                    self.buffer = BytesMut::from(&rest[..]);
                    return Ok(());
                }
            }
        }
        while self.left.is_some_and(|left| left > 0) {
            let mut entry = rest.clone();
            let answer = if self.request.legacy {
                alter_configs_response::AlterConfigsResourceResponse::decode(&mut entry, version)
                    .map(|r| (r.error_code, r.error_message))
            } else {
                incremental_alter_configs_response::AlterConfigsResourceResponse::decode(
                    &mut entry, version,
                )
                .map(|r| (r.error_code, r.error_message))
            };
            let Ok((code, message)) = answer else {
                break;
            };
            rest = entry;
            self.left = self.left.map(|left| left - 1);
            self.take(code, message.map(|m| m.to_string()))?;
        }
        if self.left != Some(0) {
            self.buffer = BytesMut::from(&rest[..]);
        }
        Ok(())
    }

    /// Keeps the answer of the next decided resource.
    fn take(&mut self, code: i16, message: Option<String>) -> anyhow::Result<()> {
        loop {
            match self.cursor.next()? {
                Next::Kept(kept, resource, duplicated)
                    if self.routes.get(kept) == Some(&Route::Decided) =>
                {
                    let ordinal = self.decision.codes.len();
                    if code != 0
                        && self.against.message(resource.as_listed(), duplicated, code) != message
                    {
                        self.decision.messages.push((ordinal as u32, message));
                    }
                    self.decision.codes.push(code);
                    return Ok(());
                }
                Next::Kept(..) | Next::Copy => {}
                Next::End => bail!("more answers than resources"),
            }
        }
    }

    fn finish(self) -> anyhow::Result<ListedConfigDecision> {
        match self.left {
            Some(0) => {
                tracing::debug!(
                    answers = self.decision.codes.len(),
                    messages_kept = self.decision.messages.len(),
                    "the controller's answer to a config alteration read"
                );
                Ok(ListedConfigDecision {
                    against: Some(self.against.clone()),
                    ..self.decision
                })
            }
            Some(left) => bail!("the controller's answer ended {left} resources short"),
            None => bail!("the controller's answer ended before its resources"),
        }
    }
}

/// A streamed answer is copied into the reader as it arrives.
impl tokio::io::AsyncWrite for DecidedAnswers<'_> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        bytes: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let fed = self.get_mut().feed(bytes).map_err(std::io::Error::other);
        std::task::Poll::Ready(fed.map(|()| bytes.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// The answer's resources, one per resource in request order, from the frame and the kept
/// codes.
pub struct ConfigResults {
    request: Arc<ChunkedConfigs>,
    answers: ListedConfigAnswers,
}

/// Writes the resources' results, [`CHUNK`] at a time.
pub type ConfigResultsWriter = PiecesWriter<ConfigResults>;

impl PieceSource for ConfigResults {
    const API: &'static str = "(Incremental)AlterConfigs";

    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + Send + '_ {
        let request = &self.request;
        let mut cursor = request.cursor();
        let mut answer = self.answers.in_order();
        let mut last = BytesMut::new();
        move || {
            let mut piece = BytesMut::new();
            for _ in 0..CHUNK {
                match cursor.next()? {
                    Next::Kept(kept, resource, duplicated) => {
                        let (code, message) = answer(kept, resource.as_listed(), duplicated);
                        last.clear();
                        encode_result(&mut last, resource, code, message, request.version)?;
                    }
                    Next::Copy => {}
                    Next::End => break,
                }
                piece.extend_from_slice(&last);
            }
            Ok((!piece.is_empty()).then_some(piece))
        }
    }
}

/// Encodes a resource's result into `out`.
fn encode_result(
    out: &mut BytesMut,
    resource: Resource,
    code: i16,
    message: Option<String>,
    version: i16,
) -> anyhow::Result<()> {
    let message = message.map(StrBytes::from_string);
    match resource {
        Resource::Incremental(resource) => {
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
                .encode(out, version)
        }
        Resource::Legacy(resource) => {
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
                .encode(out, version)
        }
    }
}

/// Alters the configs with the resources read from the frame: the answer's body lists no
/// resources, and the [`ConfigResultsWriter`] writes them.
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedConfigs,
) -> anyhow::Result<(ApiResponse, ConfigResultsWriter)> {
    let request = Arc::new(request);
    let validate_only = request.validate_only;
    let (answer, answers) = alter_listed_configs(ctx, info, request.clone(), validate_only)
        .await
        .map_err(anyhow::Error::msg)?;
    tracing::debug!(
        resources = request.count,
        kept = request.kept(),
        "a config alteration decided from its frame"
    );
    if answers.count() != request.kept() {
        bail!(
            "{} resources answered of {}",
            answers.count(),
            request.kept()
        );
    }
    let count = request.count;
    let writer = PiecesWriter::new(ConfigResults { request, answers }, count)?;
    Ok((answer, writer))
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{AlterConfigsRequest, IncrementalAlterConfigsRequest};

    use super::*;

    fn s(text: &str) -> StrBytes {
        StrBytes::from_string(text.to_owned())
    }

    fn resource(t: i8, name: &str, ops: &[(&str, i8, Option<&str>)]) -> IncrementalResource {
        IncrementalResource::default()
            .with_resource_type(t)
            .with_resource_name(s(name))
            .with_configs(
                ops.iter()
                    .map(|(key, op, value)| {
                        IncrementalConfig::default()
                            .with_name(s(key))
                            .with_config_operation(*op)
                            .with_value(value.map(s))
                    })
                    .collect(),
            )
    }

    /// 1,300 resources: distinct topics, a name repeated far apart, copies right after their
    /// first, a resource repeating one key many times, every type.
    fn mixed() -> Vec<IncrementalResource> {
        let mut resources: Vec<IncrementalResource> = (0..1_280)
            .map(|i| resource(2, &format!("t{i}"), &[("flush.ms", 0, Some("1"))]))
            .collect();
        let keys: Vec<(&str, i8, Option<&str>)> = vec![("flush.ms", 0, Some("2")); 50];
        let more = [
            resource(2, "t7", &[]),
            resource(4, "1", &[("log.retention.ms", 0, Some("5"))]),
            resource(8, "1", &[("root", 0, Some("INFO"))]),
            resource(32, "g", &[("consumer.session.timeout.ms", 1, None)]),
            resource(16, "m", &[]),
            resource(2, "many keys", &keys),
            resource(2, "", &[]),
        ];
        for (i, extra) in more.into_iter().enumerate() {
            resources.insert(i * 150 + 20, extra);
        }
        for at in [100, 100, 100, 900] {
            resources.insert(at, resources[at].clone());
        }
        resources
    }

    fn body<R: Encodable>(request: &R, version: i16) -> Bytes {
        let mut body = BytesMut::new();
        request
            .encode(&mut body, version)
            .unwrap_or_else(|e| panic!("{e}"));
        body.freeze()
    }

    /// What a resource's answer depends on: its type and name, its configs with a key's
    /// third copies on dropped, and whether another names it.
    type Seen = (i8, String, Vec<(String, i8, Option<String>)>, bool);

    fn expected(resources: &[IncrementalResource]) -> Vec<Seen> {
        resources
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut copies = std::collections::HashMap::new();
                let configs = r
                    .configs
                    .iter()
                    .filter(|c| {
                        let seen = copies.entry(c.name.to_string()).or_insert(0);
                        *seen += 1;
                        *seen <= 2
                    })
                    .map(|c| {
                        (
                            c.name.to_string(),
                            c.config_operation,
                            c.value.as_ref().map(ToString::to_string),
                        )
                    })
                    .collect();
                let named_again = resources.iter().enumerate().any(|(j, other)| {
                    j != i
                        && other.resource_type == r.resource_type
                        && other.resource_name == r.resource_name
                });
                (
                    r.resource_type,
                    r.resource_name.to_string(),
                    configs,
                    named_again,
                )
            })
            .collect()
    }

    fn seen(listed: &ChunkedConfigs) -> Vec<Seen> {
        let mut seen: Vec<Seen> = Vec::new();
        let mut cursor = listed.cursor();
        loop {
            match cursor.next().unwrap_or_else(|e| panic!("{e}")) {
                Next::Kept(_, Resource::Incremental(r), duplicated) => seen.push((
                    r.resource_type,
                    r.resource_name.to_string(),
                    r.configs
                        .iter()
                        .map(|c| {
                            (
                                c.name.to_string(),
                                c.config_operation,
                                c.value.as_ref().map(ToString::to_string),
                            )
                        })
                        .collect(),
                    duplicated,
                )),
                Next::Kept(_, Resource::Legacy(r), duplicated) => seen.push((
                    r.resource_type,
                    r.resource_name.to_string(),
                    r.configs
                        .iter()
                        .map(|c| {
                            (
                                c.name.to_string(),
                                0,
                                c.value.as_ref().map(ToString::to_string),
                            )
                        })
                        .collect(),
                    duplicated,
                )),
                Next::Copy => {
                    let last = seen
                        .last()
                        .cloned()
                        .unwrap_or_else(|| panic!("a first copy"));
                    seen.push(last);
                }
                Next::End => return seen,
            }
        }
    }

    #[test]
    fn resources_are_read_from_the_frame_as_decoded_and_named_again_as_kafka_counts() {
        let resources = mixed();
        for version in [0, 1] {
            for validate_only in [false, true] {
                let request = IncrementalAlterConfigsRequest::default()
                    .with_resources(resources.clone())
                    .with_validate_only(validate_only);
                let body = body(&request, version);
                let listed = scan(&body, ApiKey::IncrementalAlterConfigs, version)
                    .unwrap_or_else(|| panic!("long"))
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(listed.validate_only, validate_only);
                assert_eq!(listed.count, resources.len());
                assert_eq!(listed.kept(), resources.len() - 4, "three copies and one");
                assert_eq!(ListedConfigResources::count(&listed), listed.kept());
                assert_eq!(seen(&listed), expected(&resources), "v{version}");
            }
        }
        // AlterConfigs, each config without an operation.
        let legacy: Vec<LegacyResource> = resources
            .iter()
            .map(|r| {
                LegacyResource::default()
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name.clone())
                    .with_configs(
                        r.configs
                            .iter()
                            .map(|c| {
                                LegacyConfig::default()
                                    .with_name(c.name.clone())
                                    .with_value(c.value.clone())
                            })
                            .collect(),
                    )
            })
            .collect();
        let as_legacy: Vec<Seen> = expected(&resources)
            .into_iter()
            .map(|(t, n, configs, again)| {
                let configs = configs.into_iter().map(|(k, _, v)| (k, 0, v)).collect();
                (t, n, configs, again)
            })
            .collect();
        for version in [0, 1, 2] {
            let request = AlterConfigsRequest::default().with_resources(legacy.clone());
            let body = body(&request, version);
            let listed = scan(&body, ApiKey::AlterConfigs, version)
                .unwrap_or_else(|| panic!("long"))
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(ListedConfigResources::legacy(&listed));
            assert_eq!(seen(&listed), as_legacy, "AlterConfigs v{version}");
        }
    }

    #[test]
    fn short_and_malformed_requests_are_left_to_the_decoder_or_refused_whole() {
        let few =
            IncrementalAlterConfigsRequest::default().with_resources(mixed()[..CHUNK].to_vec());
        assert!(scan(&body(&few, 1), ApiKey::IncrementalAlterConfigs, 1).is_none());
        let request = IncrementalAlterConfigsRequest::default().with_resources(mixed());
        let whole = body(&request, 1);
        assert!(
            scan(&whole, ApiKey::IncrementalAlterConfigs, 2).is_none(),
            "no v2"
        );
        assert!(scan(&whole, ApiKey::DescribeConfigs, 1).is_none());
        // Cut inside the last resource, or without validate_only.
        for cut in [12, 2] {
            let short = whole.slice(..whole.len() - cut);
            assert!(scan(&short, ApiKey::IncrementalAlterConfigs, 1)
                .unwrap_or_else(|| panic!("long"))
                .is_err());
        }
        // A null resource name, or null configs, after the first chunk.
        let mut resources = mixed();
        resources.push(resource(2, "zz", &[]));
        let last = body(
            &IncrementalAlterConfigsRequest::default().with_resources(resources),
            1,
        );
        let at = last
            .windows(4)
            .rposition(|w| w == b"\x02\x03zz")
            .unwrap_or_else(|| panic!("the last resource"));
        for (offset, byte) in [(1, 0), (4, 0)] {
            let mut broken = BytesMut::from(&last[..]);
            broken[at + offset] = byte;
            assert!(
                scan(&broken.freeze(), ApiKey::IncrementalAlterConfigs, 1)
                    .unwrap_or_else(|| panic!("long"))
                    .is_err(),
                "a null at {offset}"
            );
        }
        // The frame check: a header, then the resources' count.
        let mut frame = BytesMut::new();
        kafka_protocol::messages::RequestHeader::default()
            .with_request_api_key(44)
            .with_request_api_version(1)
            .with_correlation_id(1)
            .encode(&mut frame, 2)
            .unwrap_or_else(|e| panic!("{e}"));
        frame.extend_from_slice(&whole);
        let frame = frame.freeze();
        assert!(is_long(&frame, ApiKey::IncrementalAlterConfigs, 1));
        assert!(!is_long(&frame, ApiKey::AlterConfigs, 3));
    }
}

#[cfg(test)]
mod forwarding_tests {
    use gregor_publishers::MetadataImage;
    use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
    use kafka_protocol::messages::{
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    };

    use super::*;

    fn resource(t: i8, name: &str) -> IncrementalResource {
        IncrementalResource::default()
            .with_resource_type(t)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
    }

    /// The answer frame (size prefix, header v1, body) of `answers` at v1.
    fn answer_frame(answers: &[(&str, i16, Option<&str>)]) -> Bytes {
        let response = IncrementalAlterConfigsResponse::default().with_responses(
            answers
                .iter()
                .map(|(name, code, message)| {
                    AlterConfigsResourceResponse::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_string((*name).to_owned()))
                        .with_error_code(*code)
                        .with_error_message(message.map(|m| StrBytes::from_string(m.to_owned())))
                })
                .collect(),
        );
        let mut body = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(7)
            .encode(&mut body, 1)
            .unwrap_or_else(|e| panic!("{e}"));
        response
            .encode(&mut body, 1)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut frame = BytesMut::new();
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        frame.freeze()
    }

    #[test]
    fn the_controllers_answer_is_read_as_it_arrives_keeping_only_messages_not_found_again() {
        // 1,100 unknown topics and a repeated one (refused by this node, never handed over).
        let mut resources: Vec<IncrementalResource> =
            (0..1_100).map(|i| resource(2, &format!("t{i}"))).collect();
        resources.insert(5, resource(2, "twice"));
        resources.insert(500, resource(2, "twice"));
        let request = IncrementalAlterConfigsRequest::default().with_resources(resources);
        let mut body = BytesMut::new();
        request
            .encode(&mut body, 1)
            .unwrap_or_else(|e| panic!("{e}"));
        let listed = scan(&body.freeze(), ApiKey::IncrementalAlterConfigs, 1)
            .unwrap_or_else(|| panic!("long"))
            .unwrap_or_else(|e| panic!("{e}"));
        let routes: Vec<Route> = (0..1_102)
            .map(|i| {
                if i == 5 || i == 500 {
                    Route::Local
                } else {
                    Route::Decided
                }
            })
            .collect();
        // What the controller says: unknown topics as this node's image says it, but for one
        // it knows (altered) and one whose message differs.
        let names: Vec<String> = (0..1_100).map(|i| format!("t{i}")).collect();
        let messages: Vec<String> = names
            .iter()
            .map(|n| format!("The topic '{n}' does not exist."))
            .collect();
        let answers: Vec<(&str, i16, Option<&str>)> = names
            .iter()
            .zip(&messages)
            .enumerate()
            .map(|(i, (name, message))| match i {
                3 => (name.as_str(), 0, None),
                4 => (name.as_str(), 3, Some("elsewhere")),
                _ => (name.as_str(), 3, Some(message.as_str())),
            })
            .collect();
        let frame = answer_frame(&answers);
        let against = DecidedAgainst {
            image: Arc::new(MetadataImage::empty()),
            rules: Default::default(),
            node_id: None,
        };
        for chunk in [1, 7, 4096, frame.len()] {
            let mut reader = DecidedAnswers::new(&listed, &routes, &against);
            for piece in frame.chunks(chunk) {
                reader.feed(piece).unwrap_or_else(|e| panic!("{e}"));
            }
            let decision = reader.finish().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(decision.codes.len(), 1_100, "in pieces of {chunk}");
            assert_eq!(
                decision.messages,
                vec![(4, Some("elsewhere".to_owned()))],
                "only the message not found again is kept"
            );
            assert_eq!((decision.code(3), decision.code(4)), (0, 3));
            let t9 = resource(2, "t9");
            assert_eq!(
                decision
                    .message(9, ConfigResource::Incremental(&t9), false, 3)
                    .as_deref(),
                Some("The topic 't9' does not exist.")
            );
        }
        // An answer cut short, or answering another number of resources, is refused.
        let mut reader = DecidedAnswers::new(&listed, &routes, &against);
        reader
            .feed(&frame[..frame.len() - 40])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(reader.finish().is_err());
        let mut reader = DecidedAnswers::new(&listed, &routes, &against);
        assert!(reader.feed(&answer_frame(&answers[..10])).is_err());
        // The frame handed over: the header as it came, then the decided resources alone.
        let handed = listed
            .decided_frame(b"HEAD", &routes, true)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&handed[..4], b"HEAD");
        let decoded = IncrementalAlterConfigsRequest::decode(&mut handed.freeze().slice(4..), 1)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(decoded.validate_only);
        let handed_names: Vec<String> = decoded
            .resources
            .iter()
            .map(|r| r.resource_name.to_string())
            .collect();
        assert_eq!(handed_names, names);
    }
}
