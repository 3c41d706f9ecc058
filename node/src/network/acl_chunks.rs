//! CreateAcls requests of many creations, decided without decoding their list and answered as
//! the answer is written.
//!
//! A creation is about ten bytes on the wire but a decoded `AclCreation` of about 120 bytes,
//! its result and the encoded answer: a frame of distinct creations cost a hundred times its
//! size. Here the creations stay in the frame: the controller reads them one at a time
//! (`ListedElements<AclCreation>`, every creation answered on its own, as Kafka answers each)
//! and keeps each one's answer as an index into its few distinct outcomes (a success, the
//! validation errors, the refusal past 10,000 new ACLs); the answer is written from those
//! alone, a result per creation in request order. The creations stay one decision: their
//! records are one batch, refused whole past the limit.

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::AsyncWrite;

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::acls::ListedAclCreation;
use gregor_actors::controller::logic::ListedElements;
use gregor_actors::handlers::{self, ApiResponse};

use super::dedup_decode::array_length;
use super::repeated::skip_tagged_fields;

/// Creations answered per piece of the answer; a request of no more is decoded whole.
pub const CHUNK: usize = 1024;

/// The first flexible version.
const FLEXIBLE_FROM: i16 = 2;

/// A CreateAcls request whose creations stay in the frame.
#[derive(Clone)]
pub struct ChunkedAclCreations {
    /// The request body from its first creation on.
    creations: Bytes,
    count: usize,
    version: i16,
}

/// Reads `body` (a CreateAcls request body) when it holds more than [`CHUNK`] creations;
/// `None` for other requests, decoded whole. The request is read to its end first, so a
/// malformed one is refused whole, as the crate's decoder refuses it.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedAclCreations>> {
    let mut rest = body.clone();
    let count = usize::try_from(array_length(&mut rest, version >= FLEXIBLE_FROM).ok()?).ok()?;
    if count <= CHUNK {
        return None;
    }
    let creations = rest.clone();
    let read = (|| {
        for _ in 0..count {
            AclCreation::decode(&mut rest, version)?;
        }
        skip_tagged_fields(&mut rest, version >= FLEXIBLE_FROM)
    })();
    Some(read.map(|()| ChunkedAclCreations {
        creations,
        count,
        version,
    }))
}

impl ListedElements<AclCreation> for ChunkedAclCreations {
    fn listed(&self) -> usize {
        self.count
    }

    fn distinct(&self) -> usize {
        self.count
    }

    fn denied(&self) -> usize {
        0
    }

    /// Every creation, none repeated: each is answered on its own.
    fn each_first(&self, visit: &mut dyn FnMut(&AclCreation, bool) -> bool) -> Result<(), String> {
        let mut rest = self.creations.clone();
        for _ in 0..self.count {
            let creation =
                AclCreation::decode(&mut rest, self.version).map_err(|e| e.to_string())?;
            if !visit(&creation, false) {
                break;
            }
        }
        Ok(())
    }
}

/// Writes the answer's results, one per creation in request order, from the kept outcomes,
/// [`CHUNK`] at a time.
pub struct AclResultsWriter {
    answers: ListedAclCreation,
    count: usize,
    version: i16,
    /// The encoded size of every creation's result.
    size: usize,
}

impl AclResultsWriter {
    fn new(request: &ChunkedAclCreations, answers: ListedAclCreation) -> anyhow::Result<Self> {
        let mut writer = AclResultsWriter {
            answers,
            count: request.count,
            version: request.version,
            size: 0,
        };
        writer.size = super::repeated::pieces_size(writer.pieces())?;
        Ok(writer)
    }

    /// How many creations the answer lists.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The encoded size of every creation's result.
    pub(crate) fn len(&self) -> usize {
        self.size
    }

    /// The results, [`CHUNK`] at a time.
    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + '_ {
        let mut next = 0;
        move || {
            if next == self.count {
                return Ok(None);
            }
            let mut piece = BytesMut::new();
            let end = self.count.min(next + CHUNK);
            for index in next..end {
                let (code, message) = match &self.answers.refused {
                    Some((code, message)) => (*code, Some(StrBytes::from_string(message.clone()))),
                    None => {
                        let outcome = self
                            .answers
                            .outcome(index)
                            .context("more creations than answers")?;
                        (outcome.code, outcome.message_for(""))
                    }
                };
                AclCreationResult::default()
                    .with_error_code(code)
                    .with_error_message(message)
                    .encode(&mut piece, self.version)?;
            }
            next = end;
            Ok(Some(piece))
        }
    }

    /// Writes every result, encoding them a piece at a time.
    pub(crate) async fn write_to<W: AsyncWrite + Unpin + Send>(
        &self,
        out: &mut W,
    ) -> std::io::Result<()> {
        let mut pieces = self.pieces();
        super::repeated::write_pieces(out, self.size, "CreateAcls", &mut pieces).await
    }
}

impl std::fmt::Debug for AclResultsWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclResultsWriter")
            .field("count", &self.count)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// Creates the ACLs with the controller reading the creations from the frame: the answer's
/// body lists no results, and the [`AclResultsWriter`] writes them.
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedAclCreations,
) -> anyhow::Result<(ApiResponse, AclResultsWriter)> {
    let request = std::sync::Arc::new(request);
    let (answer, answers) = handlers::create_listed_acls(ctx, info, request.clone()).await;
    tracing::debug!(
        creations = request.count,
        outcomes = answers.outcomes.len(),
        "a CreateAcls request decided from its frame"
    );
    let writer = AclResultsWriter::new(&request, answers)?;
    Ok((answer, writer))
}

#[cfg(test)]
mod tests {
    use gregor_actors::controller::logic::ListedError;
    use kafka_protocol::messages::CreateAclsRequest;

    use super::*;

    fn creation(name: &str) -> AclCreation {
        AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_resource_pattern_type(3)
            .with_principal(StrBytes::from_static_str("User:alice"))
            .with_host(StrBytes::from_static_str("*"))
            .with_operation(3)
            .with_permission_type(3)
    }

    #[test]
    fn every_creation_is_read_and_answered_in_order() -> anyhow::Result<()> {
        let creations: Vec<_> = (0..1_500)
            .map(|i| creation(&format!("t{}", i % 700)))
            .collect();
        for version in [1, 3] {
            let mut body = BytesMut::new();
            CreateAclsRequest::default()
                .with_creations(creations.clone())
                .encode(&mut body, version)?;
            let body = body.freeze();
            let request = scan(&body, version).context("chunked")??;
            let mut read = Vec::new();
            request
                .each_first(&mut |creation, repeated| {
                    assert!(!repeated);
                    read.push(creation.clone());
                    true
                })
                .map_err(anyhow::Error::msg)?;
            assert_eq!(read, creations, "v{version}");
            // Every third creation invalid, the others created.
            let invalid = ListedError {
                code: 42,
                message: Some(vec!["Invalid empty resource name".to_owned()]),
            };
            let answers = ListedAclCreation {
                per_element: (0..1_500).map(|i| u32::from(i % 3 == 0)).collect(),
                outcomes: vec![ListedError::default(), invalid],
                ..Default::default()
            };
            let writer = AclResultsWriter::new(&request, answers)?;
            let mut written = Vec::new();
            futures::executor::block_on(writer.write_to(&mut written))?;
            assert_eq!(written.len(), writer.len());
            let mut written = Bytes::from(written);
            let mut results = Vec::new();
            while !written.is_empty() {
                results.push(AclCreationResult::decode(&mut written, version)?);
            }
            let expected: Vec<_> = (0..1_500)
                .map(|i| match i % 3 {
                    0 => AclCreationResult::default()
                        .with_error_code(42)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Invalid empty resource name",
                        ))),
                    _ => AclCreationResult::default().with_error_message(None),
                })
                .collect();
            assert_eq!(results, expected, "v{version}");
            assert_eq!(writer.count(), 1_500);
            // Cut inside the last creation: refused whole.
            let cut = body.slice(..body.len() - 5);
            assert!(scan(&cut, version).context("chunked")?.is_err());
        }
        Ok(())
    }
}
