//! AlterUserScramCredentials requests naming many users, decided without decoding their lists
//! and answered as the answer is written.
//!
//! A deletion is seven bytes on the wire (a four-letter name, a mechanism, tagged fields) but a
//! decoded `ScramCredentialDeletion`, the controller's entry for its user, its result and the
//! encoded answer: a frame of distinct users cost 30 to 80 times its size. Here the alterations
//! stay in the frame, as CreateTopics' topics do (`topic_list_chunks.rs`): a scan sorts their
//! offsets by user name for each user's first appearance and whether the user comes again (two
//! bits per alteration), the controller reads the alterations from the frame one at a time
//! (deletions, then upsertions: `ListedElements<ScramAlteration>`) and keeps each distinct
//! user's answer as an index into its few distinct outcomes, and the answer, one result per
//! distinct user in order of first appearance, is written from the frame and the outcomes.
//! The valid alterations are still written as one batch, as Kafka writes them.

use std::sync::Arc;

use anyhow::{bail, Context};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::scram::{ListedScramAlteration, ScramAlteration};
use gregor_actors::controller::logic::ListedElements;
use gregor_actors::handlers::{self, ApiResponse};

use super::dedup_decode::array_length;
use super::metadata_chunks::{bit, set_bit};
use super::repeated::{skip, skip_string, skip_tagged_fields, PieceSource, PiecesWriter};
use super::topic_list_chunks::{first_appearances, name_at, REPEATED};

/// Users answered per piece of the answer; a request with no more alterations is decoded
/// whole.
pub const CHUNK: usize = 1024;

/// The one version (flexible).
const VERSION: i16 = 0;

/// An AlterUserScramCredentials request whose alterations stay in the frame.
#[derive(Clone)]
pub struct ChunkedScramAlteration {
    /// The request body.
    body: Bytes,
    /// Where the deletions start in `body` (after their list's length), and how many.
    deletions_at: usize,
    deletions: usize,
    /// Where the upsertions start in `body` (after their list's length), and how many.
    upsertions_at: usize,
    upsertions: usize,
    /// One bit per alteration (deletions, then upsertions): set on its user's first appearance.
    first: Vec<u64>,
    /// One bit per first appearance: set when the user is altered again.
    repeated: Vec<u64>,
}

/// Reads `body` (an AlterUserScramCredentials request body) when it holds more than [`CHUNK`]
/// alterations; `None` for other requests, decoded whole. The request is read to its end
/// first, so a malformed one is refused whole, as the crate's decoder refuses it.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedScramAlteration>> {
    if version != VERSION {
        return None;
    }
    let mut rest = body.clone();
    let deletions = usize::try_from(array_length(&mut rest, true).ok()?).ok()?;
    if deletions <= CHUNK {
        // Few deletions: the upsertions decide.
        let mut after = rest.clone();
        for _ in 0..deletions {
            skip_deletion(&mut after).ok()?;
        }
        let upsertions = usize::try_from(array_length(&mut after, true).ok()?).ok()?;
        if deletions + upsertions <= CHUNK {
            return None;
        }
    }
    Some(scan_alterations(body, body.len() - rest.len(), deletions))
}

fn skip_deletion(buf: &mut Bytes) -> anyhow::Result<()> {
    skip_string(buf, true)?;
    skip(buf, 1)?;
    skip_tagged_fields(buf, true)
}

fn skip_upsertion(buf: &mut Bytes) -> anyhow::Result<()> {
    skip_string(buf, true)?;
    skip(buf, 5)?;
    // Salt and salted password: compact bytes, skipped as strings are.
    skip_string(buf, true)?;
    skip_string(buf, true)?;
    skip_tagged_fields(buf, true)
}

/// The offset of `rest`'s first byte in `body`, below [`REPEATED`].
fn offset_in(body: &Bytes, rest: &Bytes) -> anyhow::Result<u32> {
    u32::try_from(body.len() - rest.len())
        .ok()
        .filter(|offset| *offset < REPEATED)
        .context("an AlterUserScramCredentials frame over 2 GiB")
}

fn scan_alterations(
    body: &Bytes,
    deletions_at: usize,
    deletions: usize,
) -> anyhow::Result<ChunkedScramAlteration> {
    let mut rest = body.slice(deletions_at..);
    // Each alteration's offset, four bytes where a decoded one costs twenty times that. Sized
    // once (an alteration is at least three bytes): a growing vector is copied, leaving holes.
    let mut offsets: Vec<u32> = Vec::with_capacity(body.len() / 3);
    for _ in 0..deletions {
        offsets.push(offset_in(body, &rest)?);
        ScramCredentialDeletion::decode(&mut rest, VERSION)?;
    }
    let upsertions = usize::try_from(array_length(&mut rest, true)?)
        .context("AlterUserScramCredentials upsertions must not be null")?;
    let upsertions_at = body.len() - rest.len();
    for _ in 0..upsertions {
        offsets.push(offset_in(body, &rest)?);
        ScramCredentialUpsertion::decode(&mut rest, VERSION)?;
    }
    skip_tagged_fields(&mut rest, true)?;
    let count = offsets.len();
    first_appearances(&mut offsets, |offset| name_at(body, offset as usize, true));
    let mut first = vec![0u64; count.div_ceil(64)];
    let mut repeated = vec![0u64; count.div_ceil(64)];
    let mut next = offsets.iter().peekable();
    let mut request = ChunkedScramAlteration {
        body: body.clone(),
        deletions_at,
        deletions,
        upsertions_at,
        upsertions,
        first: Vec::new(),
        repeated: Vec::new(),
    };
    let mut cursor = request.cursor();
    while let Some((index, element)) = cursor.next_alteration()? {
        let at = body.len() - cursor.rest.len() - element.len();
        if let Some(offset) = next.next_if(|offset| (**offset & !REPEATED) as usize == at) {
            set_bit(&mut first, index);
            if offset & REPEATED != 0 {
                set_bit(&mut repeated, index);
            }
        }
    }
    request.first = first;
    request.repeated = repeated;
    Ok(request)
}

/// The alterations of a request in order (deletions, then upsertions): each one's index and
/// bytes.
struct Cursor<'a> {
    request: &'a ChunkedScramAlteration,
    /// The rest of the list being read.
    rest: Bytes,
    /// Whether it is the upsertions'.
    upsertions: bool,
    index: usize,
}

impl Cursor<'_> {
    fn next_alteration(&mut self) -> anyhow::Result<Option<(usize, Bytes)>> {
        let request = self.request;
        if !self.upsertions && self.index == request.deletions {
            self.upsertions = true;
            self.rest = request.body.slice(request.upsertions_at..);
        }
        if self.index == request.deletions + request.upsertions {
            return Ok(None);
        }
        let mut element = self.rest.clone();
        match self.upsertions {
            true => skip_upsertion(&mut self.rest)?,
            false => skip_deletion(&mut self.rest)?,
        }
        element.truncate(element.len() - self.rest.len());
        self.index += 1;
        Ok(Some((self.index - 1, element)))
    }
}

impl ChunkedScramAlteration {
    fn cursor(&self) -> Cursor<'_> {
        Cursor {
            request: self,
            rest: self.body.slice(self.deletions_at..),
            upsertions: false,
            index: 0,
        }
    }

    /// Whether the alteration at `index` is a deletion.
    fn is_deletion(&self, index: usize) -> bool {
        index < self.deletions
    }

    /// The alteration at `index` read from its bytes.
    fn alteration(&self, index: usize, bytes: &mut Bytes) -> anyhow::Result<ScramAlteration> {
        Ok(match self.is_deletion(index) {
            true => ScramAlteration::Deletion(ScramCredentialDeletion::decode(bytes, VERSION)?),
            false => ScramAlteration::Upsertion(ScramCredentialUpsertion::decode(bytes, VERSION)?),
        })
    }
}

impl ListedElements<ScramAlteration> for ChunkedScramAlteration {
    /// A refusal answers each distinct user once, as the decoded request's does.
    fn listed(&self) -> usize {
        self.distinct()
    }

    fn distinct(&self) -> usize {
        self.first
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    fn denied(&self) -> usize {
        0
    }

    fn each_first(
        &self,
        visit: &mut dyn FnMut(&ScramAlteration, bool) -> bool,
    ) -> Result<(), String> {
        let mut cursor = self.cursor();
        while let Some((index, mut bytes)) = cursor.next_alteration().map_err(|e| e.to_string())? {
            if !bit(&self.first, index) {
                continue;
            }
            let alteration = self
                .alteration(index, &mut bytes)
                .map_err(|e| e.to_string())?;
            if !visit(&alteration, bit(&self.repeated, index)) {
                break;
            }
        }
        Ok(())
    }
}

/// The answer's results, one per distinct user in order of first appearance, from the frame
/// and the kept outcomes.
pub struct ScramResults {
    request: Arc<ChunkedScramAlteration>,
    answers: ListedScramAlteration,
}

/// Writes the users' results, [`CHUNK`] at a time.
pub type ScramResultsWriter = PiecesWriter<ScramResults>;

impl PieceSource for ScramResults {
    const API: &'static str = "AlterUserScramCredentials";

    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + Send + '_ {
        let request = &self.request;
        let mut cursor = request.cursor();
        let mut answered = 0;
        move || {
            let mut piece = BytesMut::new();
            let mut in_piece = 0;
            while in_piece < CHUNK {
                let Some((index, mut bytes)) = cursor.next_alteration()? else {
                    break;
                };
                if !bit(&request.first, index) {
                    continue;
                }
                let user = request.alteration(index, &mut bytes)?.user().to_owned();
                let (code, message) = match &self.answers.refused {
                    Some((code, message)) => (*code, Some(StrBytes::from_string(message.clone()))),
                    None => {
                        let outcome = self
                            .answers
                            .outcome(answered)
                            .context("more users than answers")?;
                        (outcome.code, outcome.message_for(&user))
                    }
                };
                AlterUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(user))
                    .with_error_code(code)
                    .with_error_message(message)
                    .encode(&mut piece, VERSION)?;
                answered += 1;
                in_piece += 1;
            }
            Ok((in_piece > 0).then_some(piece))
        }
    }
}

/// The writer of `request`'s answer, the controller's `answers`.
fn results_writer(
    request: Arc<ChunkedScramAlteration>,
    answers: ListedScramAlteration,
) -> anyhow::Result<ScramResultsWriter> {
    let count = request.distinct();
    if answers.refused.is_none() && answers.answered() != count {
        bail!("{} users answered of {count}", answers.answered());
    }
    PiecesWriter::new(ScramResults { request, answers }, count)
}

/// Alters the credentials with the controller reading the alterations from the frame: the
/// answer's body lists no users, and the [`ScramResultsWriter`] writes them.
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedScramAlteration,
) -> anyhow::Result<(ApiResponse, ScramResultsWriter)> {
    let request = Arc::new(request);
    let (answer, answers) =
        handlers::alter_listed_scram_credentials(ctx, info, request.clone()).await;
    tracing::debug!(
        alterations = request.deletions + request.upsertions,
        users = request.distinct(),
        outcomes = answers.outcomes.len(),
        "an AlterUserScramCredentials request decided from its frame"
    );
    Ok((answer, results_writer(request, answers)?))
}

#[cfg(test)]
mod tests {
    use gregor_actors::controller::logic::ListedError;

    use super::*;

    /// A request body listing `deletions` and `upsertions`.
    fn body(
        deletions: &[ScramCredentialDeletion],
        upsertions: &[ScramCredentialUpsertion],
    ) -> anyhow::Result<Bytes> {
        use kafka_protocol::messages::AlterUserScramCredentialsRequest;
        let mut body = BytesMut::new();
        AlterUserScramCredentialsRequest::default()
            .with_deletions(deletions.to_vec())
            .with_upsertions(upsertions.to_vec())
            .encode(&mut body, VERSION)?;
        Ok(body.freeze())
    }

    fn deletion(name: &str) -> ScramCredentialDeletion {
        ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(name.to_owned()))
            .with_mechanism(1)
    }

    fn upsertion(name: &str) -> ScramCredentialUpsertion {
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(name.to_owned()))
            .with_mechanism(2)
            .with_iterations(8192)
            .with_salt(Bytes::from_static(b"salt"))
            .with_salted_password(Bytes::from_static(&[7; 32]))
    }

    #[test]
    fn users_are_read_from_the_frame_and_answered_once_in_order() -> anyhow::Result<()> {
        // 700 deletions and 700 upsertions: "a" deleted twice, "b" deleted and upserted, "u5"
        // upserted twice; the others once.
        let mut deletions: Vec<_> = (0..698).map(|i| deletion(&format!("d{i}"))).collect();
        deletions.insert(3, deletion("a"));
        deletions.insert(9, deletion("a"));
        deletions.push(deletion("b"));
        let mut upsertions: Vec<_> = (0..699).map(|i| upsertion(&format!("u{i}"))).collect();
        upsertions.insert(0, upsertion("b"));
        upsertions.push(upsertion("u5"));
        let body = body(&deletions, &upsertions)?;
        assert!(scan(&body, 1).is_none(), "another version");
        let request = scan(&body, 0).context("chunked")??;
        assert_eq!(request.distinct(), 2 + 698 + 699);
        let mut visited = Vec::new();
        request
            .each_first(&mut |alteration, repeated| {
                visited.push((alteration.clone(), repeated));
                true
            })
            .map_err(anyhow::Error::msg)?;
        assert_eq!(visited.len(), request.distinct());
        assert_eq!(visited[3], (ScramAlteration::Deletion(deletion("a")), true));
        assert_eq!(
            visited[699],
            (ScramAlteration::Deletion(deletion("b")), true)
        );
        assert_eq!(
            visited[700],
            (ScramAlteration::Upsertion(upsertion("u0")), false)
        );
        assert_eq!(
            visited[705],
            (ScramAlteration::Upsertion(upsertion("u5")), true)
        );
        assert_eq!(
            visited[1398],
            (ScramAlteration::Upsertion(upsertion("u698")), false)
        );
        // Every user answered in that order: the repeated ones DUPLICATE_RESOURCE, the others
        // alike.
        let duplicate = ListedError {
            code: 92,
            message: Some(vec!["twice".to_owned()]),
        };
        let answers = ListedScramAlteration {
            per_element: visited
                .iter()
                .map(|(_, repeated)| u32::from(*repeated))
                .collect(),
            outcomes: vec![ListedError::default(), duplicate],
            ..Default::default()
        };
        let writer = results_writer(Arc::new(request.clone()), answers)?;
        let results: Vec<AlterUserScramCredentialsResult> = writer.written_as(0)?;
        let expected: Vec<_> = visited
            .iter()
            .map(|(alteration, repeated)| {
                let result = AlterUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(alteration.user().to_owned()));
                match repeated {
                    true => result
                        .with_error_code(92)
                        .with_error_message(Some(StrBytes::from_static_str("twice"))),
                    false => result.with_error_message(None),
                }
            })
            .collect();
        assert_eq!(results, expected);
        // Refused whole: each user once, with the refusal.
        let writer = results_writer(
            Arc::new(request),
            ListedScramAlteration::refused(41, "gone"),
        )?;
        let refused: Vec<AlterUserScramCredentialsResult> = writer.written_as(0)?;
        for result in &refused {
            assert_eq!(
                (result.error_code, result.error_message.as_deref()),
                (41, Some("gone"))
            );
        }
        assert_eq!(refused.len(), 1 + 1 + 698 + 699);
        Ok(())
    }

    #[test]
    fn a_malformed_alteration_after_the_first_chunk_refuses_the_request() -> anyhow::Result<()> {
        let deletions: Vec<_> = (0..1500).map(|i| deletion(&format!("d{i}"))).collect();
        let body = body(&deletions, &[])?;
        // Cut inside the last deletion.
        let cut = body.slice(..body.len() - 4);
        assert!(scan(&cut, 0).context("chunked")?.is_err());
        assert!(scan(&body, 0).context("chunked")?.is_ok());
        Ok(())
    }
}
