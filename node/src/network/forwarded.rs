//! Answers that cross an Envelope without being held whole.
//!
//! A forwarded request's answer can be several times its frame (a CreateTopics of 100 MB of
//! four-letter names refused whole answers about 600 MB: every name with its message). The
//! controller writes such an answer into its EnvelopeResponse as the inner answer is written
//! ([`Enveloped`]), and the broker copies it from the controller's connection to its client's
//! as it arrives ([`StreamedAnswer`]): neither holds more than a buffer of it. A broker that
//! forwarded a CreateTopics without the topics it denied adds their answers after the
//! controller's the same way ([`Extended`]).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::dedup_decode::{array_length, uvarint};
use super::peer::PeerStream;
use super::repeated::{put_array_length, skip, skip_tagged_fields, ResponseBytes};
use super::topic_list_chunks::{CreatePartitionsApi, CreateTopicsApi, DeniedResultsWriter};

/// Answers up to this size are read whole from the controller; larger ones are streamed.
pub(crate) const WHOLE_ANSWER_LIMIT: usize = 1024 * 1024;

/// Bytes of a streamed answer read before it is handed on: the envelope's header and the
/// inner answer's length, then the inner answer's header and throttle time (which the broker
/// may raise before passing them on).
const HEAD_BYTES: usize = 4096;

/// Bytes copied per read while a streamed answer is passed on.
const COPY_BYTES: usize = 64 * 1024;

/// An EnvelopeResponse whose inner answer is written as it is encoded: the envelope's size
/// and header, the inner answer's length, the inner answer without its size prefix, then the
/// envelope's error code (none) and tagged fields.
#[derive(Debug)]
pub struct Enveloped {
    size: i32,
    head: Bytes,
    inner: ResponseBytes,
    tail: Bytes,
}

impl Enveloped {
    /// Wraps `inner` (a response, size prefix included) in an EnvelopeResponse whose header
    /// carries `correlation_id`. `empty` is the same EnvelopeResponse encoded with empty
    /// response data, size prefix included, from which the header and the tail are taken.
    pub(crate) fn new(empty: &[u8], inner: ResponseBytes) -> Result<Self, String> {
        // The empty envelope ends with the data's length (1: empty), the error code and no
        // tagged fields.
        let split = empty
            .len()
            .checked_sub(4)
            .filter(|at| *at >= 4 && empty[*at] == 1)
            .ok_or_else(|| "an empty envelope response of an unexpected shape".to_owned())?;
        let inner_len = inner
            .len()
            .checked_sub(4)
            .ok_or_else(|| "an inner answer without its size".to_owned())?;
        let mut head = BytesMut::with_capacity(split);
        head.put_slice(&empty[4..split]);
        // Compact bytes: the length plus one, as an array's length is written.
        put_array_length(&mut head, inner_len, true).map_err(|e| e.to_string())?;
        let tail = Bytes::copy_from_slice(&empty[split + 1..]);
        let size = i32::try_from(head.len() + inner_len + tail.len())
            .map_err(|_| "an envelope response over 2 GiB".to_owned())?;
        Ok(Enveloped {
            size,
            head: head.freeze(),
            inner,
            tail,
        })
    }

    /// The response's size on the wire, size prefix included.
    pub fn len(&self) -> usize {
        4 + self.size as usize
    }

    /// Whether the response is empty (never: it has a size prefix and a header).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the whole EnvelopeResponse, size prefix included.
    pub async fn write_to<W: AsyncWrite + Unpin + Send>(&self, out: &mut W) -> std::io::Result<()> {
        write_head(out, self.size, &self.head).await?;
        self.inner
            .write_unwrapped_to(&mut SkipPrefix { out, skip: 4 })
            .await?;
        out.write_all(&self.tail).await
    }
}

/// Writes a response's size prefix (`size`) and its first bytes `head` in one write.
pub(crate) async fn write_head<W: AsyncWrite + Unpin + Send>(
    out: &mut W,
    size: i32,
    head: &[u8],
) -> std::io::Result<()> {
    let mut first = BytesMut::with_capacity(4 + head.len());
    first.put_i32(size);
    first.put_slice(head);
    out.write_all(&first).await
}

/// Passes writes on to `out` after dropping the first `skip` bytes written (the inner
/// answer's size prefix, which the envelope replaces with its own length).
struct SkipPrefix<'a, W> {
    out: &'a mut W,
    skip: usize,
}

impl<W: AsyncWrite + Unpin> AsyncWrite for SkipPrefix<'_, W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.skip > 0 {
            let dropped = self.skip.min(buf.len());
            self.skip -= dropped;
            return Poll::Ready(Ok(dropped));
        }
        Pin::new(&mut *self.out).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.out).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.out).poll_shutdown(cx)
    }
}

/// What the active controller answered a forwarded request with.
#[derive(Debug)]
pub enum ForwardedAnswer {
    /// The answer, size prefix included.
    Whole(Bytes),
    /// An answer too large to read whole.
    Streamed(Box<StreamedAnswer>),
}

/// A forwarded answer still on the controller's connection: its first bytes read (and
/// possibly patched), the rest copied to the client as it arrives.
pub struct StreamedAnswer {
    /// The answer's first bytes, size prefix included, as the client gets them.
    head: Bytes,
    /// Bytes of the answer still to read after `head`.
    rest: usize,
    /// Bytes of the enclosing frame after the answer (the envelope's error code and tagged
    /// fields), read and dropped.
    trailer: usize,
    /// How long one read from the controller may take.
    read_timeout: Duration,
    stream: tokio::sync::Mutex<Option<PeerStream>>,
}

impl std::fmt::Debug for StreamedAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamedAnswer")
            .field("head", &self.head.len())
            .field("rest", &self.rest)
            .field("trailer", &self.trailer)
            .finish_non_exhaustive()
    }
}

impl StreamedAnswer {
    /// Reads the start of a frame of `size` bytes (its size already read) from `stream`: an
    /// EnvelopeResponse when `enveloped`, else the answer itself.
    pub(crate) async fn open(
        mut stream: PeerStream,
        size: usize,
        enveloped: bool,
        read_timeout: Duration,
    ) -> std::io::Result<Self> {
        let mut first = vec![0; size.min(HEAD_BYTES)];
        tokio::time::timeout(read_timeout, stream.read_exact(&mut first))
            .await
            .map_err(|_| timed_out(read_timeout))??;
        let first = Bytes::from(first);
        let (data_at, data_len) = if enveloped {
            envelope_data(&first)?
        } else {
            (0, size)
        };
        let end = data_at
            .checked_add(data_len)
            .filter(|end| *end <= size)
            .ok_or_else(|| {
                invalid(format!(
                    "an answer of {data_len} bytes in a {size}-byte frame"
                ))
            })?;
        // The first read may hold all of a short answer, and part of what follows it.
        let in_first = first.len().min(end) - data_at;
        let answer_size = i32::try_from(data_len)
            .map_err(|_| invalid(format!("an answer of {data_len} bytes")))?;
        let mut head = BytesMut::with_capacity(4 + in_first);
        head.put_i32(answer_size);
        head.put_slice(&first[data_at..data_at + in_first]);
        Ok(StreamedAnswer {
            head: head.freeze(),
            rest: data_len - in_first,
            trailer: size - end.max(first.len()),
            read_timeout,
            stream: tokio::sync::Mutex::new(Some(stream)),
        })
    }

    /// The answer's first bytes, size prefix included.
    pub(crate) fn head(&self) -> &Bytes {
        &self.head
    }

    /// Replaces the answer's first bytes with `head`, of the same length.
    pub(crate) fn set_head(&mut self, head: Bytes) {
        if head.len() == self.head.len() {
            self.head = head;
        }
    }

    /// The answer's size on the wire, size prefix included.
    pub fn len(&self) -> usize {
        self.head.len() + self.rest
    }

    /// Whether the answer is empty (never: it has a size prefix).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the answer to `out`; the controller's connection is then closed (it is not
    /// worth keeping for the rare answer this large).
    pub async fn write_to<W: AsyncWrite + Unpin + Send>(&self, out: &mut W) -> std::io::Result<()> {
        self.write_range(out, 0, 0).await.map(drop)
    }

    /// Copies the answer to `out` from byte `start` (size prefix included; within the head),
    /// holding back its last `hold` bytes, which it returns.
    async fn write_range<W: AsyncWrite + Unpin + Send>(
        &self,
        out: &mut W,
        start: usize,
        hold: usize,
    ) -> std::io::Result<Vec<u8>> {
        let mut guard = self.stream.lock().await;
        let mut stream = guard
            .take()
            .ok_or_else(|| std::io::Error::other("a streamed answer written twice"))?;
        let end = self
            .len()
            .checked_sub(hold)
            .filter(|end| start <= *end && start <= self.head.len())
            .ok_or_else(|| std::io::Error::other("a range past a streamed answer"))?;
        let mut held = Vec::with_capacity(hold);
        let in_head = end.min(self.head.len());
        out.write_all(&self.head[start..in_head]).await?;
        held.extend_from_slice(&self.head[in_head..]);
        let mut buffer = vec![0; COPY_BYTES.min(self.rest.max(1))];
        let mut written = self.head.len().max(in_head);
        let mut left = self.rest;
        while left > 0 {
            let want = left.min(buffer.len());
            let read = self.read(&mut stream, &mut buffer[..want]).await?;
            let pass = end.saturating_sub(written).min(read);
            out.write_all(&buffer[..pass]).await?;
            held.extend_from_slice(&buffer[pass..read]);
            written += read;
            left -= read;
        }
        let mut left = self.trailer;
        let mut trailer = Vec::new();
        while left > 0 {
            let want = left.min(buffer.len());
            let read = self.read(&mut stream, &mut buffer[..want]).await?;
            if trailer.len() < 2 {
                trailer.extend_from_slice(&buffer[..read.min(2)]);
            }
            left -= read;
        }
        if let Some(code) = trailer.get(..2).map(|b| i16::from_be_bytes([b[0], b[1]])) {
            if code != 0 {
                tracing::warn!(code, "a forwarded answer came with an envelope error");
            }
        }
        Ok(held)
    }

    /// Reads some bytes from the controller within the read timeout.
    async fn read(&self, stream: &mut PeerStream, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = tokio::time::timeout(self.read_timeout, stream.read(buffer))
            .await
            .map_err(|_| timed_out(self.read_timeout))??;
        if read == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the controller closed its connection in the middle of an answer",
            ));
        }
        Ok(read)
    }

    /// The whole answer, size prefix included, when it is at most `limit` bytes.
    pub(crate) async fn into_bytes(self, limit: usize) -> std::io::Result<Bytes> {
        if self.len() > limit {
            return Err(invalid(format!("an answer of {} bytes", self.len())));
        }
        let mut out = Vec::with_capacity(self.len());
        self.write_to(&mut out).await?;
        Ok(Bytes::from(out))
    }
}

impl ForwardedAnswer {
    /// The answer's size on the wire, size prefix included.
    fn len(&self) -> usize {
        match self {
            ForwardedAnswer::Whole(bytes) => bytes.len(),
            ForwardedAnswer::Streamed(answer) => answer.len(),
        }
    }

    /// The answer's first bytes (all of a whole one), size prefix included.
    pub(crate) fn first_bytes(&self) -> &Bytes {
        match self {
            ForwardedAnswer::Whole(bytes) => bytes,
            ForwardedAnswer::Streamed(answer) => answer.head(),
        }
    }

    /// Writes the answer from byte `start` on, holding back its last `hold` bytes, which it
    /// returns.
    async fn write_range<W: AsyncWrite + Unpin + Send>(
        &self,
        out: &mut W,
        start: usize,
        hold: usize,
    ) -> std::io::Result<Vec<u8>> {
        match self {
            ForwardedAnswer::Whole(bytes) => {
                let end = bytes
                    .len()
                    .checked_sub(hold)
                    .filter(|end| start <= *end)
                    .ok_or_else(|| std::io::Error::other("a range past an answer"))?;
                out.write_all(&bytes[start..end]).await?;
                Ok(bytes[end..].to_vec())
            }
            ForwardedAnswer::Streamed(answer) => answer.write_range(out, start, hold).await,
        }
    }
}

/// A forwarded CreateTopics answer with the answers of the topics the broker denied after the
/// controller's own (Kafka's controller, too, adds them after those it decided): the list's
/// length raised, the denied topics' answers written before the body's tagged fields.
#[derive(Debug)]
pub struct Extended {
    source: ForwardedAnswer,
    size: i32,
    /// Where the list's length starts in the source, and how long it is there.
    list_at: usize,
    list_length_len: usize,
    list_length: Bytes,
    /// Bytes after the list in the source: the body's tagged fields (flexible versions).
    tail_len: usize,
    appended: Appended,
}

/// The answers a broker adds after a forwarded answer's topics: those of the topics it denied.
#[derive(Debug)]
pub enum Appended {
    CreateTopics(DeniedResultsWriter<CreateTopicsApi>),
    CreatePartitions(DeniedResultsWriter<CreatePartitionsApi>),
    DeleteTopics(super::delete_topics_chunks::DeletionResultsWriter),
}

impl Appended {
    /// How many topics it answers.
    pub(crate) fn answers(&self) -> usize {
        match self {
            Appended::CreateTopics(denied) => denied.count(),
            Appended::CreatePartitions(denied) => denied.count(),
            Appended::DeleteTopics(denied) => denied.count(),
        }
    }

    /// The encoded size of their answers.
    fn len(&self) -> usize {
        match self {
            Appended::CreateTopics(denied) => denied.len(),
            Appended::CreatePartitions(denied) => denied.len(),
            Appended::DeleteTopics(denied) => denied.len(),
        }
    }

    async fn write_to<W: AsyncWrite + Unpin + Send>(&self, out: &mut W) -> std::io::Result<()> {
        match self {
            Appended::CreateTopics(denied) => denied.write_to(out).await,
            Appended::CreatePartitions(denied) => denied.write_to(out).await,
            Appended::DeleteTopics(denied) => denied.write_to(out).await,
        }
    }
}

impl Extended {
    /// `source` (a CreateTopics or DeleteTopics answer, `flexible` or not, whose topic list's
    /// length starts at `list_at`) with `appended` after its topics.
    pub(crate) fn new(
        source: ForwardedAnswer,
        flexible: bool,
        list_at: usize,
        appended: Appended,
    ) -> std::io::Result<Self> {
        let mut list = source
            .first_bytes()
            .slice(list_at.min(source.first_bytes().len())..);
        let before = list.len();
        let count = array_length(&mut list, flexible)
            .ok()
            .and_then(|count| usize::try_from(count).ok())
            .ok_or_else(|| invalid("a forwarded answer without its topics".to_owned()))?;
        let list_length_len = before - list.len();
        // After the list: the body's tagged fields (flexible versions).
        let tail_len = usize::from(flexible);
        let merged = count + appended.answers();
        let mut list_length = BytesMut::with_capacity(5);
        put_array_length(&mut list_length, merged, flexible)
            .map_err(|_| invalid(format!("a list of {merged} topics")))?;
        let size = (source.len() - 4 - list_length_len + list_length.len())
            .checked_add(appended.len())
            .and_then(|size| i32::try_from(size).ok())
            .ok_or_else(|| invalid("a forwarded answer over 2 GiB".to_owned()))?;
        Ok(Extended {
            source,
            size,
            list_at,
            list_length_len,
            list_length: list_length.freeze(),
            tail_len,
            appended,
        })
    }

    /// The answer's size on the wire, size prefix included.
    pub fn len(&self) -> usize {
        4 + self.size as usize
    }

    /// Whether the answer is empty (never: it has a size prefix and a header).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the whole answer, size prefix included.
    pub async fn write_to<W: AsyncWrite + Unpin + Send>(&self, out: &mut W) -> std::io::Result<()> {
        let first = self.source.first_bytes();
        let mut head = BytesMut::with_capacity(self.list_at + self.list_length.len());
        head.put_i32(self.size);
        head.put_slice(first.get(4..self.list_at).unwrap_or_default());
        head.put_slice(&self.list_length);
        out.write_all(&head).await?;
        let tail = self
            .source
            .write_range(out, self.list_at + self.list_length_len, self.tail_len)
            .await?;
        self.appended.write_to(out).await?;
        out.write_all(&tail).await
    }
}

/// Where an EnvelopeResponse's inner answer starts in `first` (the frame's first bytes, after
/// its size) and how long it is.
fn envelope_data(first: &Bytes) -> std::io::Result<(usize, usize)> {
    let mut buf = first.clone();
    let read = |buf: &mut Bytes| -> anyhow::Result<u32> {
        // Response header v1: correlation id, then tagged fields.
        skip(buf, 4)?;
        skip_tagged_fields(buf, true)?;
        // The response data: compact nullable bytes (0 for null).
        uvarint(buf)
    };
    let length = read(&mut buf)
        .map_err(|e| invalid(format!("an envelope header past its first read: {e}")))?;
    let length = usize::try_from(length)
        .ok()
        .and_then(|length| length.checked_sub(1))
        .ok_or_else(|| invalid("an envelope response without data".to_owned()))?;
    Ok((first.len() - buf.len(), length))
}

fn invalid(detail: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, detail)
}

fn timed_out(after: Duration) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("no data from the controller within {after:?}"),
    )
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{EnvelopeResponse, ResponseHeader, ResponseKind};
    use kafka_protocol::protocol::Encodable;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// An inner answer frame of `body_len` bytes after its size prefix.
    fn inner_frame(body_len: usize) -> Bytes {
        let mut frame = BytesMut::with_capacity(4 + body_len);
        frame.put_i32(body_len as i32);
        frame.extend((0..body_len).map(|i| (i % 251) as u8));
        frame.freeze()
    }

    /// The crate's encoding of an EnvelopeResponse frame (size prefix included).
    fn crate_envelope(correlation_id: i32, data: Option<Bytes>) -> Bytes {
        let mut out = BytesMut::new();
        out.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut out, 1)
            .unwrap();
        ResponseKind::Envelope(EnvelopeResponse::default().with_response_data(data))
            .encode(&mut out, 0)
            .unwrap();
        let size = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&size.to_be_bytes());
        out.freeze()
    }

    #[tokio::test]
    async fn an_enveloped_answer_is_the_crates_envelope_response() {
        // Data lengths around the varint's one- and two-byte boundary, and a large one.
        for body_len in [0, 125, 126, 127, 300, 2_000_000] {
            let inner = inner_frame(body_len);
            let empty = crate_envelope(77, Some(Bytes::new()));
            let enveloped = Enveloped::new(&empty, ResponseBytes::Whole(inner.clone())).unwrap();
            let mut written = Vec::new();
            enveloped.write_to(&mut written).await.unwrap();
            let expected = crate_envelope(77, Some(inner.slice(4..)));
            assert_eq!(written.len(), enveloped.len(), "{body_len}");
            assert!(written == expected[..], "{body_len}");
        }
        assert!(Enveloped::new(b"\x00\x00", ResponseBytes::Whole(inner_frame(3))).is_err());
    }

    /// A connected pair of loopback sockets: the controller's end and the broker's.
    async fn socket_pair() -> (TcpStream, PeerStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (connected, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (accepted.unwrap().0, PeerStream::Plain(connected.unwrap()))
    }

    /// Sends `frame` from the controller's end, then reads it as a streamed answer.
    async fn streamed(frame: Bytes, enveloped: bool) -> std::io::Result<StreamedAnswer> {
        let (mut controller, mut broker) = socket_pair().await;
        // A frame shorter than its size is followed by the controller closing its end.
        let whole = frame.len() >= 4
            && i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize
                <= frame.len() - 4;
        tokio::spawn(async move {
            let _ = controller.write_all(&frame).await;
            if whole {
                // Keep the connection open until the broker closed its end.
                let _ = controller.read(&mut [0u8; 1]).await;
            }
        });
        let size = broker.read_i32().await? as usize;
        StreamedAnswer::open(broker, size, enveloped, Duration::from_secs(10)).await
    }

    #[tokio::test]
    async fn a_streamed_envelope_answer_is_its_inner_answer() {
        for body_len in [5_000, 2_000_000] {
            let inner = inner_frame(body_len);
            let mut answer = streamed(crate_envelope(9, Some(inner.slice(4..))), true)
                .await
                .unwrap();
            assert_eq!(answer.len(), inner.len());
            // The envelope's header and data length were read with the head.
            assert!((9..=4 + HEAD_BYTES).contains(&answer.head().len()));
            // A raised throttle time in the first bytes reaches the client.
            let mut head = BytesMut::from(&answer.head()[..]);
            head[4..8].copy_from_slice(&[0, 0, 1, 0]);
            answer.set_head(head.freeze());
            let mut expected = BytesMut::from(&inner[..]);
            expected[4..8].copy_from_slice(&[0, 0, 1, 0]);
            let mut written = Vec::new();
            answer.write_to(&mut written).await.unwrap();
            assert!(written == expected[..], "{body_len}");
            // Written once only.
            assert!(answer.write_to(&mut Vec::new()).await.is_err());
        }
    }

    #[tokio::test]
    async fn a_streamed_plain_answer_is_copied_whole() {
        let inner = inner_frame(3_000_000);
        let answer = streamed(inner.clone(), false).await.unwrap();
        let copied = answer.into_bytes(usize::MAX).await.unwrap();
        assert!(copied == inner);
        let answer = streamed(inner.clone(), false).await.unwrap();
        assert!(answer.into_bytes(1_000).await.is_err());
    }

    #[tokio::test]
    async fn a_broken_envelope_answer_is_an_error() {
        // No data (an envelope error), and data longer than the frame.
        assert!(streamed(crate_envelope(9, None), true).await.is_err());
        let mut frame = BytesMut::new();
        frame.put_i32(5_000);
        frame.put_i32(9);
        frame.put_u8(0);
        frame.put_slice(&[0xff, 0xff, 0x03]);
        frame.put_bytes(0, 4_992);
        assert!(streamed(frame.freeze(), true).await.is_err());
        // A controller that closes half-way through the answer.
        let inner = inner_frame(2_000_000);
        let mut cut = BytesMut::from(&crate_envelope(9, Some(inner.slice(4..)))[..]);
        cut.truncate(1_000_000);
        let answer = streamed(cut.freeze(), true).await.unwrap();
        let mut written = Vec::new();
        let error = answer.write_to(&mut written).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof);
    }

    #[tokio::test]
    async fn denied_topics_follow_the_controllers_answer() {
        use crate::network::topic_list_chunks::{scan, DeniedResults};
        use kafka_protocol::messages::create_topics_request::CreatableTopic;
        use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
        use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, TopicName};
        let name = |i: usize| TopicName(format!("t{i}").into());
        let encoded = |version: i16, body: &CreateTopicsResponse| {
            let mut out = BytesMut::new();
            out.put_i32(0);
            ResponseHeader::default()
                .with_correlation_id(3)
                .encode(&mut out, if version >= 5 { 1 } else { 0 })
                .unwrap();
            body.encode(&mut out, version).unwrap();
            let size = (out.len() - 4) as i32;
            out[..4].copy_from_slice(&size.to_be_bytes());
            out.freeze()
        };
        for version in [4, 7] {
            // 1,100 topics, every tenth denied (all named once, so each is asked).
            let topics: Vec<_> = (0..1_100)
                .map(|i| {
                    CreatableTopic::default()
                        .with_name(name(i))
                        .with_num_partitions(1)
                        .with_replication_factor(1)
                })
                .collect();
            let mut body = BytesMut::new();
            CreateTopicsRequest::default()
                .with_topics(topics)
                .encode(&mut body, version)
                .unwrap();
            let mut request = scan::<CreateTopicsApi>(&body.freeze(), version)
                .unwrap()
                .unwrap();
            request.deny(|topic| !topic.ends_with('0')).unwrap();
            let denied = DeniedResults::writer(request).unwrap();
            // The controller's answer for the others (a few, as a small answer is).
            let decided: Vec<_> = (0..3)
                .map(|i| {
                    CreatableTopicResult::default()
                        .with_name(name(i))
                        .with_num_partitions(1)
                })
                .collect();
            let controller = CreateTopicsResponse::default()
                .with_throttle_time_ms(7)
                .with_topics(decided.clone());
            let source = encoded(version, &controller);
            let list_at = 4 + 4 + usize::from(version >= 5) + 4;
            let extended = Extended::new(
                ForwardedAnswer::Whole(source),
                version >= 5,
                list_at,
                Appended::CreateTopics(denied),
            )
            .unwrap();
            let mut written = Vec::new();
            extended.write_to(&mut written).await.unwrap();
            let mut all = decided;
            all.extend(
                (0..1_100)
                    .filter(|i| i % 10 == 0)
                    .map(|i| gregor_actors::handlers::creation_denied(name(i))),
            );
            let expected = encoded(version, &controller.with_topics(all));
            assert_eq!(written.len(), extended.len(), "v{version}");
            assert!(written == expected[..], "v{version}");
        }
    }

    #[test]
    fn the_envelope_header_is_parsed_with_tagged_fields() {
        // Correlation id, one tagged field (tag 3, two bytes), then data of 4 bytes.
        let first = Bytes::from_static(&[0, 0, 0, 1, 1, 3, 2, 9, 9, 5, 1, 2, 3, 4]);
        assert_eq!(envelope_data(&first).unwrap(), (10, 4));
        assert!(envelope_data(&Bytes::from_static(&[0, 0, 0, 1, 1, 3, 200])).is_err());
        assert!(envelope_data(&Bytes::from_static(&[0, 0, 0, 1, 0, 0])).is_err());
    }
}
