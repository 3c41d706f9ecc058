//! CreateAcls and DeleteAcls requests of many creations or filters, decided without decoding
//! their list and answered as the answer is written.
//!
//! A creation or filter is about ten bytes on the wire but a decoded `AclCreation` or
//! `DeleteAclsFilter` of about 120 bytes, its result and the encoded answer: a frame of
//! distinct elements cost 50 to 100 times its size. Here the elements stay in the frame: the
//! controller reads them one at a time (`ListedElements`, every element answered on its own,
//! as Kafka answers each) and keeps each one's answer as an index into its few distinct
//! outcomes (a success, the validation errors, the refusal past 10,000 ACLs; for DeleteAcls
//! each distinct selection of ACLs); the answer is written from those alone, a result per
//! element in request order. The elements stay one decision: their records are one batch,
//! refused whole past the limit.

use std::marker::PhantomData;
use std::sync::Arc;

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::acls::{matching_acl, FilterOutcome};
use gregor_actors::controller::logic::{ListedAnswers, ListedElements, ListedError};
use gregor_actors::handlers::{self, ApiResponse};

use super::dedup_decode::array_length;
use super::repeated::{skip_tagged_fields, PieceSource, PiecesWriter};

/// Elements answered per piece of the answer; a request of no more is decoded whole.
pub const CHUNK: usize = 1024;

/// The first flexible version of both APIs.
const FLEXIBLE_FROM: i16 = 2;

/// A CreateAcls or DeleteAcls request whose creations or filters (`T`) stay in the frame.
#[derive(Clone)]
pub struct ChunkedAclList<T> {
    /// The request body from its first element on.
    elements: Bytes,
    count: usize,
    version: i16,
    element: PhantomData<fn() -> T>,
}

/// A CreateAcls request whose creations stay in the frame.
pub type ChunkedAclCreations = ChunkedAclList<AclCreation>;

/// A DeleteAcls request whose filters stay in the frame.
pub type ChunkedAclFilters = ChunkedAclList<DeleteAclsFilter>;

/// Reads `body` (a CreateAcls or DeleteAcls request body, of `T`s) when it holds more than
/// [`CHUNK`] elements; `None` for other requests, decoded whole. The request is read to its end
/// first, so a malformed one is refused whole, as the crate's decoder refuses it.
pub fn scan<T: Decodable>(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedAclList<T>>> {
    let mut rest = body.clone();
    let count = usize::try_from(array_length(&mut rest, version >= FLEXIBLE_FROM).ok()?).ok()?;
    if count <= CHUNK {
        return None;
    }
    let elements = rest.clone();
    let read = (|| {
        for _ in 0..count {
            T::decode(&mut rest, version)?;
        }
        skip_tagged_fields(&mut rest, version >= FLEXIBLE_FROM)
    })();
    Some(read.map(|()| ChunkedAclList {
        elements,
        count,
        version,
        element: PhantomData,
    }))
}

impl<T: Decodable> ListedElements<T> for ChunkedAclList<T> {
    fn listed(&self) -> usize {
        self.count
    }

    fn distinct(&self) -> usize {
        self.count
    }

    fn denied(&self) -> usize {
        0
    }

    /// Every element, none repeated: each is answered on its own.
    fn each_first(&self, visit: &mut dyn FnMut(&T, bool) -> bool) -> Result<(), String> {
        let mut rest = self.elements.clone();
        for _ in 0..self.count {
            let element = T::decode(&mut rest, self.version).map_err(|e| e.to_string())?;
            if !visit(&element, false) {
                break;
            }
        }
        Ok(())
    }
}

/// How one API's elements are answered.
pub trait AclAnswer {
    /// What the controller keeps of an element's answer.
    type Outcome: Sync;
    /// An element's answer.
    type Result: Encodable;
    const NAME: &'static str;

    /// The answer to an element of a request refused whole.
    fn refused(code: i16, message: &str) -> Self::Result;

    /// The answer to an element the controller decided `outcome`.
    fn decided(outcome: &Self::Outcome) -> Self::Result;
}

/// CreateAcls' results.
#[derive(Debug)]
pub struct CreationAnswer;

impl AclAnswer for CreationAnswer {
    type Outcome = ListedError;
    type Result = AclCreationResult;
    const NAME: &'static str = "CreateAcls";

    fn refused(code: i16, message: &str) -> AclCreationResult {
        AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message.to_owned())))
    }

    fn decided(outcome: &ListedError) -> AclCreationResult {
        AclCreationResult::default()
            .with_error_code(outcome.code)
            .with_error_message(outcome.message_for(""))
    }
}

/// DeleteAcls' filter results.
#[derive(Debug)]
pub struct FilterAnswer;

impl AclAnswer for FilterAnswer {
    type Outcome = FilterOutcome;
    type Result = DeleteAclsFilterResult;
    const NAME: &'static str = "DeleteAcls";

    fn refused(code: i16, message: &str) -> DeleteAclsFilterResult {
        DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message.to_owned())))
    }

    fn decided(outcome: &FilterOutcome) -> DeleteAclsFilterResult {
        match outcome {
            FilterOutcome::Failed(error) => DeleteAclsFilterResult::default()
                .with_error_code(error.code)
                .with_error_message(error.message_for("")),
            FilterOutcome::Matched(acls) => DeleteAclsFilterResult::default()
                .with_error_message(None)
                .with_matching_acls(acls.iter().map(matching_acl).collect()),
        }
    }
}

/// The answer's results, one per element in request order, from the kept outcomes.
pub struct AclResults<A: AclAnswer> {
    answers: ListedAnswers<A::Outcome>,
    count: usize,
    version: i16,
}

/// Writes an answer's results, [`CHUNK`] at a time.
pub type AclResultsWriter<A> = PiecesWriter<AclResults<A>>;

impl<A: AclAnswer> PieceSource for AclResults<A> {
    const API: &'static str = A::NAME;

    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + Send + '_ {
        let mut next = 0;
        move || {
            if next == self.count {
                return Ok(None);
            }
            let mut piece = BytesMut::new();
            let end = self.count.min(next + CHUNK);
            for index in next..end {
                let result = match &self.answers.refused {
                    Some((code, message)) => A::refused(*code, message),
                    None => A::decided(
                        self.answers
                            .outcome(index)
                            .context("more elements than answers")?,
                    ),
                };
                result.encode(&mut piece, self.version)?;
            }
            next = end;
            Ok(Some(piece))
        }
    }
}

/// Logs how `request` was decided and builds the writer of its answers.
fn decided<T, A: AclAnswer>(
    request: &ChunkedAclList<T>,
    answers: ListedAnswers<A::Outcome>,
) -> anyhow::Result<AclResultsWriter<A>> {
    tracing::debug!(
        elements = request.count,
        outcomes = answers.outcomes.len(),
        "a {} request decided from its frame",
        A::NAME
    );
    let results = AclResults {
        answers,
        count: request.count,
        version: request.version,
    };
    PiecesWriter::new(results, request.count)
}

/// Creates the ACLs with the controller reading the creations from the frame: the answer's
/// body lists no results, and the [`AclResultsWriter`] writes them.
pub(crate) async fn handle_creations(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedAclCreations,
) -> anyhow::Result<(ApiResponse, AclResultsWriter<CreationAnswer>)> {
    let request = Arc::new(request);
    let (answer, answers) = handlers::create_listed_acls(ctx, info, request.clone()).await;
    Ok((answer, decided(&request, answers)?))
}

/// Deletes the ACLs the filters select with the controller reading them from the frame: the
/// answer's body lists no results, and the [`AclResultsWriter`] writes them.
pub(crate) async fn handle_filters(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedAclFilters,
) -> anyhow::Result<(ApiResponse, AclResultsWriter<FilterAnswer>)> {
    let request = Arc::new(request);
    let (answer, answers) = handlers::delete_listed_acls(ctx, info, request.clone()).await;
    Ok((answer, decided(&request, answers)?))
}

#[cfg(test)]
mod tests {
    use gregor_actors::controller::logic::acls::ListedAclCreation;
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
            let request: ChunkedAclCreations = scan(&body, version).context("chunked")??;
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
            let writer: AclResultsWriter<CreationAnswer> = decided(&request, answers)?;
            let results: Vec<AclCreationResult> = writer.written_as(version)?;
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
            assert!(scan::<AclCreation>(&cut, version)
                .context("chunked")?
                .is_err());
        }
        Ok(())
    }
}
